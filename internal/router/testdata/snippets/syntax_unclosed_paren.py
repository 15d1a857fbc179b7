# tier: nano
# reason: nano: SyntaxError at line 5, column 6 (not run)
# error: SyntaxError: '(' was never closed
import json
print(json.dumps({"a": 1})
x = 2
