# tier: heavy
# reason: heavy: uses subprocesses (subprocess, os.system), which nano cannot start
import os
import subprocess

out = subprocess.run(["echo", "hi"], capture_output=True, text=True).stdout
print(out.strip())
os.system("true")
print(os.path.basename("/a/b"))
