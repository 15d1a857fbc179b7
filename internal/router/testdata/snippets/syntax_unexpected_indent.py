# tier: nano
# reason: nano: IndentationError at line 5, column 4 (not run)
# error: IndentationError: unexpected indent
x = 1
    y = 2
