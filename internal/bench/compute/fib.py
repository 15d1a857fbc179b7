# Recursive function calls: fib(25), five times.
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)

for _ in range(5):
    r = fib(25)
print(r)
