# tier: heavy
# reason: heavy: uses sockets (socket), which nano cannot open
import json
import socket

with socket.create_connection(("example.com", 80), timeout=5) as s:
    s.sendall(b"HEAD / HTTP/1.0\r\nHost: example.com\r\n\r\n")
    print(json.dumps(s.recv(64).decode("latin-1")))
