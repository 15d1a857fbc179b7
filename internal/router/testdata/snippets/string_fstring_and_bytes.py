# tier: nano
# reason: nano: no imports
lib = "pandas"
print(f"import {lib} as pd")
print(b"import numpy", r"from scipy import stats", """
import matplotlib.pyplot as plt
""")
