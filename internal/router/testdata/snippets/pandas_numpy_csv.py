# tier: heavy
# reason: heavy: imports numpy, pandas (not in nano; in image python-datascience)
import io
import numpy as np
import pandas as pd

csv = io.StringIO("x,y\n1,2\n3,4\n5,6\n")
df = pd.read_csv(csv)
df["z"] = np.log(df["x"] * df["y"])
print(df.describe())
