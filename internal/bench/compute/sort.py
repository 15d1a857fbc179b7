# Sort a seeded random list of floats and of strings.
import random

rng = random.Random(42)
nums = [rng.random() for _ in range(300_000)]
strs = [str(rng.randrange(10**9)) for _ in range(100_000)]
a = sorted(nums)
b = sorted(strs)
print(a[0] <= a[-1], b[0], b[-1])
