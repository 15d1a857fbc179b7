# tier: heavy
# reason: heavy: imports numpy, mpl_toolkits, matplotlib (not in nano; in image python-datascience)
import numpy as np
from mpl_toolkits.mplot3d import Axes3D
import matplotlib.pyplot as plt

fig = plt.figure()
ax = fig.add_subplot(projection="3d")
t = np.linspace(0, 10, 200)
ax.plot(np.sin(t), np.cos(t), t)
