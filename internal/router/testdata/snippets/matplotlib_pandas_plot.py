# tier: heavy
# reason: heavy: imports pandas, matplotlib (not in nano; in image python-datascience)
import pandas as pd
import matplotlib.pyplot as plt

df = pd.DataFrame({"month": range(1, 13), "revenue": [3, 4, 5, 4, 6, 7, 8, 7, 9, 10, 11, 12]})
ax = df.plot(x="month", y="revenue", kind="bar")
ax.set_title("Revenue")
plt.tight_layout()
plt.show()
