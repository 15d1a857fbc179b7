# tier: heavy
# reason: heavy: imports pandas (not in nano; in image python-datascience)
import os
USE_PANDAS = os.environ.get("USE_PANDAS") == "1"
if USE_PANDAS:
    import pandas as pd
    print(pd.__version__)
else:
    print("plain python")
