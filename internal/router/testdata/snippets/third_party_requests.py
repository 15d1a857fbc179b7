# tier: heavy
# reason: heavy: imports requests (not in nano nor in any image)
import requests
print(requests.get("https://example.com").status_code)
