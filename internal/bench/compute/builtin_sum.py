# Built-in sum over ranges: C loops inside the interpreter.
total = 0
for _ in range(10):
    total += sum(range(1_000_000))
print(total)
