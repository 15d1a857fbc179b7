# tier: nano
# reason: nano: imports only importlib, json (all in nano)
import importlib as il
from importlib import import_module
mod = il.import_module("json")
enc = import_module("json.encoder")
print(mod.dumps([1]), enc.__name__)
