# tier: nano
# reason: nano: imports only json (all in nano)
# reason: nano: relative import ..models has no package to resolve in (the interpreter will say so)
import json
from ..models import User, Order

print(json.dumps([User.__name__, Order.__name__]))
