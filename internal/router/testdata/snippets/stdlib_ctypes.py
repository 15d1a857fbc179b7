# tier: heavy
# reason: heavy: imports ctypes (not in nano; in image python-datascience)
import ctypes
print(ctypes.sizeof(ctypes.c_long))
