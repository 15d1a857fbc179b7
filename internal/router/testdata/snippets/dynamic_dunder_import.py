# tier: heavy
# reason: heavy: imports pandas (not in nano; in image python-datascience)
pd = __import__("pandas")
print(pd.DataFrame({"a": [1]}))
