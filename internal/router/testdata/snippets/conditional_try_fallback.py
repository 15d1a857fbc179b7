# tier: nano
# reason: nano: imports only json (all in nano)
# reason: nano: optional import of ujson left out (guarded by except ImportError)
try:
    import ujson as json
except ImportError:
    import json

print(json.dumps({"fast": False}))
