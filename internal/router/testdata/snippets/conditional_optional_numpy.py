# tier: nano
# reason: nano: imports only math (all in nano)
# reason: nano: optional import of numpy left out (guarded by except ImportError)
import math
try:
    import numpy as np
except ModuleNotFoundError:
    np = None

def norm(v):
    if np is not None:
        return float(np.linalg.norm(v))
    return math.sqrt(sum(x * x for x in v))

print(norm([3, 4]))
