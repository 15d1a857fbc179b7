# tier: heavy
# reason: heavy: imports numpy (not in nano; in image python-datascience)
import importlib
np = importlib.import_module("numpy")
print(np.arange(3))
