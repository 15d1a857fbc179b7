# tier: heavy
# reason: heavy: imports pandas (not in nano; in image python-datascience)
import json

def load(records):
    from pandas import DataFrame
    return DataFrame.from_records(records)

print(load(json.loads('[{"a": 1}, {"a": 2}]')))
