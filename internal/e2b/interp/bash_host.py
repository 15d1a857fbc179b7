# The bash contexts of the code interpreter (package interp, bash.go): a persistent bash process
# per context, kept by the session's own Python interpreter, which runs each bash cell as one of
# its runs. So a cell's output streams, is capped and is audited as any run's; its timeout is the
# run's; and nothing new listens in the sandbox. This source is run (once a version) into the
# module _agentbox_bash; each cell calls cell(key, code, env, sentinel), which returns the cell's
# exit status (the last expression of the run, read by bash.go).
#
# A cell: the code is written to STATE/<key>.cell, and one line on the shell's stdin sources it
# (with stdin from /dev/null, so the cell's commands never read the next line), then prints the
# sentinel with the status on stdout and the sentinel alone on stderr. What comes before the
# sentinels is the cell's output, relayed as it comes. A SIGINT to the shell's process group
# interrupts the cell, not the shell: the shell's INT trap returns from the sourced cell (status
# 130). If the shell does not come back within a grace period (a program ignoring SIGINT), the
# whole group is killed, and the next cell starts a new shell and says so.
import os
import select
import signal
import subprocess
import time

VERSION = 1
STATE = "/tmp/.agentbox-bash"
GRACE = 0.5  # the guest restarts Python after its own 1 s grace; the shell must end before
shells = {}
lost = {}  # why a context's shell ended, for its next cell to say


def _write(fd, data):
    while data:
        try:
            n = os.write(fd, data)
        except InterruptedError:
            continue
        data = data[n:]


def _note(text):
    _write(2, ("[agentbox] " + text + "\n").encode())


def _kill_stale(key):
    # A shell of an earlier Python process (restarted after an interrupt it did not take, or
    # rewound) would live on, orphaned: end it. Says whether there was one.
    try:
        with open(os.path.join(STATE, key + ".pid")) as f:
            pid = int(f.read().strip())
        if pid > 1 and all(s.pid != pid for s in shells.values()):
            os.killpg(pid, signal.SIGKILL)
            return True
    except Exception:
        pass
    return False


def _start(key, why=None):
    os.makedirs(STATE, mode=0o700, exist_ok=True)
    if _kill_stale(key) and why is None:
        why = "the session's interpreter was restarted or rewound, and this context's bash shell with it"
    if why is not None:
        _note("%s: this cell runs in a new shell, without the earlier cells' variables, functions and working directory" % why)
    p = subprocess.Popen(["/bin/bash", "--noprofile", "--norc", "-s"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                         close_fds=True)
    with open(os.path.join(STATE, key + ".pid"), "w") as f:
        f.write(str(p.pid))
    for fd in (p.stdout.fileno(), p.stderr.fileno()):
        os.set_blocking(fd, False)
    shells[key] = p
    return p


def _quote(s):
    return "'" + s.replace("'", "'\\''") + "'"


def _ended(p, key, why, now=True):
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except Exception:
        pass
    try:
        code = p.wait(timeout=2)
    except Exception:
        code = -1
    shells.pop(key, None)
    lost[key] = why
    if now:
        _note("%s; the next cell starts a new shell (its variables, functions and working directory are lost)" % why)
    return code if code >= 0 else 128 - code


def _held(buf, mark):
    """How many bytes at the end of buf may be the start of mark (held until more comes)."""
    for k in range(min(len(buf), len(mark) - 1), 0, -1):
        if buf.endswith(mark[:k]):
            return k
    return 0


def cell(key, code, env, sentinel):
    p = shells.get(key)
    if p is not None and p.poll() is not None:
        shells.pop(key, None)
        if os.path.exists(os.path.join(STATE, key + ".pid")):  # else ended on purpose (a restart)
            lost[key] = "the bash shell of this context had ended (status %s)" % p.returncode
        p = None
    if p is None:
        p = _start(key, lost.pop(key, None))
    path = os.path.join(STATE, key + ".cell")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as f:
        f.write(code)
        if not code.endswith("\n"):
            f.write("\n")
    names = [k for k in env if k.isidentifier() and k.isascii()]
    line = ""
    if names:
        # The cell's environment variables, then the shell's own again.
        line += "__agentbox_env=$(declare -p %s 2>/dev/null); export %s; " % (
            " ".join(names), " ".join("%s=%s" % (k, _quote(env[k])) for k in names))
    # An interrupt returns from the cell being sourced (between cells it does nothing). The trap
    # is set again for each cell: bash leaves it unusable after it returned from a cell
    # interrupted while waiting for a program.
    line += "trap 'return 130 2>/dev/null' INT; source %s </dev/null; __agentbox_rc=$?; " % _quote(path)
    if names:
        line += "unset %s; eval \"$__agentbox_env\"; unset __agentbox_env; " % " ".join(names)
    line += "printf '%%s %%d\\n' %s \"$__agentbox_rc\"; printf '%%s\\n' %s >&2; unset __agentbox_rc\n" % (sentinel, sentinel)
    mark = sentinel.encode()
    try:
        p.stdin.write(line.encode())
        p.stdin.flush()
    except OSError:
        return _ended(p, key, "the bash shell has ended")
    fds = {p.stdout.fileno(): 1, p.stderr.fileno(): 2}
    bufs = {1: b"", 2: b""}
    status = None
    interrupted_at = None
    done = {1: False, 2: False}
    while not (done[1] and done[2]):
        try:
            wait = 1.0
            if interrupted_at is not None:
                wait = interrupted_at + GRACE - time.monotonic()
                if wait <= 0:
                    return _ended(p, key, "the cell did not end when interrupted, so its shell was killed")
            ready, _, _ = select.select([f for f, out in fds.items() if not done[out]], [], [], wait)
            for f in ready:
                out = fds[f]
                try:
                    data = os.read(f, 65536)
                except BlockingIOError:
                    continue
                if not data:
                    return _ended(p, key, "the bash shell exited", now=False)
                buf = bufs[out] + data
                i = buf.find(mark)
                if i >= 0:
                    _write(out, buf[:i])
                    rest = buf[i + len(mark):]
                    if out == 1:
                        if b"\n" not in rest:
                            bufs[out] = buf  # the status is still coming
                            continue
                        try:
                            status = int(rest.split(b"\n", 1)[0].strip())
                        except ValueError:
                            status = 1
                    bufs[out] = b""
                    done[out] = True
                else:
                    keep = _held(buf, mark)  # a sentinel may be cut between reads
                    _write(out, buf[:len(buf) - keep])
                    bufs[out] = buf[len(buf) - keep:]
        except KeyboardInterrupt:
            # The run's timeout (or an interrupt): interrupt the cell, keep the shell.
            if interrupted_at is None:
                interrupted_at = time.monotonic()
                try:
                    os.killpg(p.pid, signal.SIGINT)
                except Exception:
                    pass
    return status if status is not None else 1
