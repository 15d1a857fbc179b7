# tier: nano
# reason: nano: SyntaxError at line 6, column 11 (not run)
# error: SyntaxError: unterminated string literal (detected at line 6)
import pandas as pd
df = pd.DataFrame()
print(df, 'done)
