# tier: nano
# reason: nano: imports only hashlib, base64, hmac, secrets (all in nano)
import hashlib, base64, hmac, secrets

key = secrets.token_bytes(16)
msg = b"hello"
print(hashlib.sha256(msg).hexdigest())
print(base64.b64encode(hmac.new(key, msg, "sha256").digest()).decode())
