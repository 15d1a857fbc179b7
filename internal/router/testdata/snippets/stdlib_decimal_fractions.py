# tier: nano
# reason: nano: imports only decimal, fractions (all in nano)
from decimal import Decimal, getcontext
from fractions import Fraction
getcontext().prec = 30
print(Decimal(1) / Decimal(7), Fraction(3, 4) + Fraction(1, 6))
