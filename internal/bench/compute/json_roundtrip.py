# Encode and decode a ~1 MB JSON document a few times.
import json

doc = {
    "items": [
        {"id": i, "name": "item-%d" % i, "price": i * 0.25, "tags": ["a", "b", str(i % 10)], "ok": i % 3 == 0}
        for i in range(12_000)
    ]
}
size = 0
for _ in range(5):
    s = json.dumps(doc)
    size = len(s)
    back = json.loads(s)
assert back == doc
print(size)
