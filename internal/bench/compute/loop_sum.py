# Pure-Python loop: interpreter dispatch and small-int arithmetic.
total = 0
for i in range(2_000_000):
    total += i * 3 % 7
print(total)
