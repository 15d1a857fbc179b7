# tier: nano
# reason: nano: imports only math, random, itertools (all in nano)
def simulate(n):
    import math
    import random
    from itertools import accumulate
    random.seed(1)
    steps = [random.choice([-1, 1]) for _ in range(n)]
    walk = list(accumulate(steps))
    return max(walk), math.sqrt(n)

print(simulate(1000))
