# String building, splitting, joining, formatting and methods.
parts = []
for i in range(200_000):
    parts.append("word%d" % i)
s = ",".join(parts)
pieces = s.split(",")
up = s.upper().lower()
n = sum(1 for p in pieces if p.endswith("7"))
f = "".join(f"{p:>12}|" for p in pieces[:50_000])
print(len(s), len(pieces), len(up), n, len(f), s.count("word1"), s.replace("word", "w").find("w199999"))
