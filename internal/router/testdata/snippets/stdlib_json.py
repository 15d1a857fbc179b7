# tier: nano
# reason: nano: imports only json (all in nano)
import json
data = {"status": "ok", "items": [1, 2, 3]}
print(json.dumps(data, indent=2))
