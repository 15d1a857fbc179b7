# tier: nano
# reason: nano: SyntaxError at line 5, column 9 (not run)
# error: SyntaxError: invalid syntax
import matplotlib.pyplot as plt
total = = 3
