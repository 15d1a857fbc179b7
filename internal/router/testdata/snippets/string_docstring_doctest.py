# tier: nano
# reason: nano: imports only doctest (all in nano)
def mean(xs):
    """Return the mean.

    >>> import numpy as np
    >>> mean(np.array([1, 2]))
    1.5
    """
    return sum(xs) / len(xs)

import doctest
print(mean([1, 2, 3]))
