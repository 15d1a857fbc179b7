# tier: nano
# reason: nano: imports only json (all in nano)
# import torch
# from sklearn.linear_model import LinearRegression
import json  # import pandas
print(json.dumps("from numpy import array"))
