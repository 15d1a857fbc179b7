# Dict insert, lookup, update and delete with string and int keys.
d = {}
for i in range(150_000):
    d["k%d" % i] = i
hits = 0
for i in range(0, 300_000, 2):
    if "k%d" % i in d:
        hits += 1
for i in range(0, 150_000, 3):
    del d["k%d" % i]
e = {i: i * i for i in range(100_000)}
total = sum(e[i] for i in range(0, 100_000, 5))
print(len(d), hits, total)
