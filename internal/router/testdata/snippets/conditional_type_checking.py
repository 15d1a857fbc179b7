# tier: nano
# reason: nano: imports only __future__, typing (all in nano)
from __future__ import annotations
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

def describe(df: pd.DataFrame) -> str:
    return "a frame"

print(describe(None))
