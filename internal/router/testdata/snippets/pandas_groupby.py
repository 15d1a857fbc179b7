# tier: heavy
# reason: heavy: imports pandas (not in nano; in image python-datascience)
import pandas as pd

df = pd.DataFrame({"city": ["a", "b", "a", "c"], "sales": [10, 20, 30, 5]})
summary = df.groupby("city")["sales"].agg(["sum", "mean"]).sort_values("sum", ascending=False)
print(summary)
