# tier: nano
# reason: nano: IndentationError at line 6, column 1 (not run)
# error: IndentationError: expected an indented block after 'for' statement on line 5
import json
for i in range(3):
print(json.dumps(i))
