# tier: heavy
# reason: heavy: uses subprocesses (os.fork), which nano cannot start
from os import fork, getpid

system = "linux"  # a name of its own, not os.system
pid = fork()
print("child" if pid == 0 else "parent", getpid(), system)
