# tier: heavy
# reason: heavy: imports numpy (not in nano; in image python-datascience)
import sys
try:
    import numpy as np
except ImportError:
    sys.exit("this script needs numpy: pip install numpy")

print(np.arange(5).sum())
