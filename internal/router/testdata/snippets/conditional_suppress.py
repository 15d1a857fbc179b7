# tier: nano
# reason: nano: imports only contextlib (all in nano)
# reason: nano: optional import of numpy left out (guarded by except ImportError)
from contextlib import suppress

np = None
with suppress(ImportError):
    import numpy as np
print(np is None)
