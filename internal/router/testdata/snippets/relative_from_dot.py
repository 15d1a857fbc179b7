# tier: nano
# reason: nano: no imports
# reason: nano: relative import . has no package to resolve in (the interpreter will say so)
from . import utils
print(utils.VERSION)
