# SHA-256 over 10 MB.
import hashlib

data = bytes(range(256)) * (10 * 1024 * 1024 // 256)
h = hashlib.sha256()
for i in range(0, len(data), 1 << 16):
    h.update(data[i:i + (1 << 16)])
print(h.hexdigest())
