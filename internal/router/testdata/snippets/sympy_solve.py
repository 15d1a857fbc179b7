# tier: heavy
# reason: heavy: imports sympy (not in nano; in image python-datascience)
import sympy as sp
x = sp.symbols("x")
print(sp.solve(x**2 - 5*x + 6, x))
