# tier: nano
# reason: nano: no imports
code = "import pandas as pd\nprint(pd.__version__)"
print(len(code))
exec("x = 1")
