# tier: heavy
# reason: heavy: imports scipy, numpy (not in nano; in image python-datascience)
from scipy.optimize import minimize
import numpy as np

res = minimize(lambda v: (v[0] - 1) ** 2 + (v[1] + 2) ** 2, np.zeros(2))
print(res.x.round(3))
