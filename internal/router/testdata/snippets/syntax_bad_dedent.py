# tier: nano
# reason: nano: IndentationError at line 8, column 12 (not run)
# error: IndentationError: unindent does not match any outer indentation level
import numpy as np
def f():
    if True:
        x = 1
      y = 2
