# tier: heavy
# reason: heavy: imports ssl (not in nano; in image python-datascience)
import json
import ssl
print(ssl.OPENSSL_VERSION, json.dumps({}))
