# tier: nano
# reason: nano: imports only importlib (all in nano)
# reason: nano: 1 dynamic import(s) the router cannot read (a ModuleNotFoundError in nano is retried in heavy)
import importlib
name = "pan" + "das"
mod = importlib.import_module(name)
print(mod)
