# tier: nano
# reason: nano: SyntaxError at line 4, column 19 (not run)
# error: SyntaxError: closing parenthesis ')' does not match opening parenthesis '['
data = {'k': [1, 2)}
