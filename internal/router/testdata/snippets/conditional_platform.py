# tier: nano
# reason: nano: imports only sys, os (all in nano)
import sys
if sys.platform == "win32":
    import msvcrt
    import winreg
elif sys.platform.startswith("darwin"):
    import _scproxy
import os
print(os.sep)
