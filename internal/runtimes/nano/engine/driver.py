# The driver of a nano instance, run as `python -c DRIVER`. It prepares the interpreter once
# (imports, working directory, GC), then serves runs: it parks in one read of fd 0 into a
# preallocated buffer, always at the same place (per-step snapshots of a parked instance rely on
# an identical call stack every time), takes a hand-over (4-byte little-endian length + JSON),
# runs the code as __main__, flushes the streams and reports to the control device (4-byte
# length + JSON), then parks again. Everything it needs is bound to locals first, so user code
# that rebinds sys, os or json affects only itself.
import builtins
import functools
import gc
import io
import json
import linecache
import os
import signal
import sys
import types


def _agentbox_serve(PARK=@PARK@, CTL="@CTL@", WORKDIR="@WORKDIR@", HEADROOM=@HEADROOM@, NONET=@NONET@):
    fio = io.FileIO(0, "rb", closefd=False)
    buf = bytearray(PARK)
    # The park goes through a partial: the interpreter's specializer (PEP 659) rewrites a call of
    # a method such as fio.readinto after a few runs into a direct call with a shallower C stack,
    # and a park at another depth than the first cannot be snapshotted, reset or restored (see
    # reset.go). A call of a partial object is never specialized, so every park is at one depth.
    park = functools.partial(fio.readinto, buf)
    loads, dumps = json.loads, json.dumps
    o_open, o_write, o_close, o_exit, O_WRONLY = os.open, os.write, os.close, os._exit, os.O_WRONLY
    environ = os.environ
    base_env = dict(environ)
    modules = sys.modules
    real_stdout, real_stderr = sys.stdout, sys.stderr
    lcache = linecache.cache
    ModuleType = types.ModuleType
    BaseExc, SysExit = BaseException, SystemExit
    # Builtins the reporting path calls: user code may rebind them in builtins (the instance's
    # memory is reset after the run, but the report must get out first).
    b_len, b_mv, b_isinstance, b_int, b_print = len, memoryview, isinstance, int, print
    session = None
    runs = 0
    in_user = False

    # The host interrupts code at its deadline by tripping SIGINT in the guest's memory
    # (interrupt.go). Only user code is interrupted: a trip that lands while the driver reports
    # is ignored (the host trips again until the driver parks).
    def on_sigint(signum, frame):
        if in_user:
            raise KeyboardInterrupt
    signal.signal(signal.SIGINT, on_sigint)

    def new_main():
        m = ModuleType("__main__")
        m.__dict__.update(__builtins__=builtins, __spec__=None, __loader__=None, __annotations__={})
        return m

    def report(exit_code, error):
        try:
            data = dumps({"exit": exit_code, "error": error}).encode()
            frame = b_len(data).to_bytes(4, "little") + data
            fd = o_open(CTL, O_WRONLY)
            try:
                mv = b_mv(frame)
                while mv:
                    mv = mv[o_write(fd, mv):]
            finally:
                o_close(fd)
        except BaseExc:
            o_exit(125)  # the host sees the instance end: a broken driver

    def exit_status(e):
        code = e.code
        if code is None:
            return 0
        if b_isinstance(code, b_int):
            return code & 0xFF
        try:
            b_print(code, file=sys.stderr)
        except BaseExc:
            pass
        return 1

    def drop_handler_frame(name, text):
        if name == "KeyboardInterrupt":  # the driver's SIGINT handler is not the user's frame
            text = "".join(l for l in text.splitlines(True) if 'File "<agentbox-driver>"' not in l)
        return text

    # An exception that ends a run: its record, the traceback less the driver's own frames,
    # echoed to stderr (package pyerror).
    describe = _agentbox_pyerror(drop_handler_frame)

    def flush():
        for s in (sys.stdout, sys.stderr, real_stdout, real_stderr):
            try:
                s.flush()
            except BaseExc:
                pass

    # Line-buffered stdout (stderr already is): output printed before a deadline stops the
    # guest is not lost in Python's buffer.
    try:
        sys.stdout.reconfigure(line_buffering=True)
    except BaseExc:
        pass
    os.chdir(WORKDIR)
    # The code has no stdin: input() and sys.stdin.read() meet EOF at once (EOFError), as in a
    # script run with stdin closed. (fd 0 is the driver's hand-over pipe: a read of it by the
    # code itself waits for the deadline.)
    sys.stdin = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    # No network: the name functions this build's _socket lacks (so socket.getaddrinfo,
    # create_connection, urllib...) raise socket.gaierror saying so and how to ask for it, not
    # "module '_socket' has no attribute 'getaddrinfo'". (nano.Cannot knows the message.)
    try:
        import _socket
    except ImportError:
        _socket = None
    if _socket is not None:
        def no_network(*args, **kwargs):
            raise _socket.gaierror(getattr(_socket, "EAI_NONAME", -2), NONET)
        for name in ("getaddrinfo", "getnameinfo", "gethostbyname", "gethostbyname_ex", "gethostbyaddr",
                     "getservbyname", "getservbyport", "getprotobyname"):
            if not hasattr(_socket, name):
                setattr(_socket, name, no_network)
    # Warm what the first run would pay for: compile() builds the AST types on first use (~8 ms
    # in the -O0 build), the JSON codecs set up their scanners.
    exec(compile("pass", "<string>", "exec", dont_inherit=True), {"__builtins__": builtins})
    loads(dumps({"exit": 0, "error": None, "x": [1.5, "s"]}))
    # Grow the heap by HEADROOM and free it again: the allocator keeps the space, so most runs
    # fit in the memory the instance parks with, and an instance whose memory did not grow can
    # be reset to its first park (see reset.go).
    bytes(HEADROOM)
    gc.collect()
    gc.freeze()
    while True:
        n = park()  # parked here between runs
        if not n:
            o_exit(0)
        size = int.from_bytes(buf[:4], "little")
        data = bytearray(buf[4:n])
        while len(data) < size:
            chunk = fio.read(size - len(data))
            if not chunk:
                o_exit(0)
            data += chunk
        req = loads(data)
        del data
        runs += 1
        keep = req.get("keep")
        if not keep:
            environ.clear()
            environ.update(base_env)
        environ.update(req.get("env") or {})
        if req.get("reseed") and "random" in modules:
            try:
                modules["random"].seed()
            except BaseExc:
                pass
        code = req["code"]
        if keep:
            if session is None:
                session = new_main()
            main = session
            fname = "<run-%d>" % runs
        else:
            main = new_main()
            fname = "<string>"
        modules["__main__"] = main
        lcache[fname] = (len(code), None, code.splitlines(True), fname)
        exit_code, error = 0, None
        try:
            in_user = True
            try:
                exec(compile(code, fname, "exec", dont_inherit=True), main.__dict__)
            finally:
                in_user = False
        except SysExit as e:
            exit_code = exit_status(e)
        except BaseExc as e:
            exit_code, error = 1, describe(e)
        flush()
        del main, code, req
        report(exit_code, error)


# The exception formatter shared with the other tiers' drivers (package pyerror): the engine puts
# its source, which defines _agentbox_pyerror, in place of the next line.
# @PYERROR@

_agentbox_serve()
