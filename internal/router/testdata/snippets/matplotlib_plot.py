# tier: heavy
# reason: heavy: imports matplotlib (not in nano; in image python-datascience)
import math
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

xs = [i / 10 for i in range(100)]
plt.plot(xs, [math.sin(x) for x in xs], label="sin")
plt.legend()
plt.savefig("sine.png")
