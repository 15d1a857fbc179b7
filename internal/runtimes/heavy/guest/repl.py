# The Python side of the heavy tier's guest agent, run as `python3 -u -c REPL` by the agent as an
# unprivileged user. One process per sandbox keeps one __main__ namespace, so a session keeps its
# variables and imports between runs. Requests come on fd 3 and reports go to fd 4, each a 4-byte
# little-endian length and JSON; stdout and stderr are pipes the agent streams to the daemon.
# Everything the loop needs is bound to locals first, so user code that rebinds sys, os or json
# affects only itself.
import builtins
import json
import linecache
import os
import signal
import sys
import traceback
import types


def _agentbox_repl(REQ=3, REP=4):
    loads, dumps = json.loads, json.dumps
    o_read, o_write, o_exit, o_chdir = os.read, os.write, os._exit, os.chdir
    environ = os.environ
    base_env = dict(environ)
    modules = sys.modules
    real_stdout, real_stderr = sys.stdout, sys.stderr
    format_exception = traceback.format_exception
    lcache = linecache.cache
    BaseExc, SysExit, KbdInt = BaseException, SystemExit, KeyboardInterrupt
    o_signal, SIGINT, SIG_IGN = signal.signal, signal.SIGINT, signal.SIG_IGN
    default_int_handler = signal.default_int_handler
    # Only a running cell is interrupted (the C handler adds no frame to its traceback); between
    # cells SIGINT is ignored, so the loop itself is never interrupted.
    o_signal(SIGINT, SIG_IGN)

    def read_exact(n):
        data = b""
        while len(data) < n:
            chunk = o_read(REQ, n - len(data))
            if not chunk:
                o_exit(0)
            data += chunk
        return data

    def report(msg):
        try:
            data = dumps(msg).encode()
            mv = memoryview(len(data).to_bytes(4, "little") + data)
            while mv:
                mv = mv[o_write(REP, mv):]
        except BaseExc:
            o_exit(125)  # the agent sees the process end: a broken REPL

    def exit_status(e):
        code = e.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code & 0xFF
        try:
            print(code, file=sys.stderr)
        except BaseExc:
            pass
        return 1

    def describe(e):
        name = type(e).__name__
        try:
            value = str(e)
        except BaseExc:
            value = "<exception str() failed>"
        tb = e.__traceback__
        if tb is not None:
            tb = tb.tb_next  # the loop's own frame
        try:
            text = "".join(format_exception(type(e), e, tb))
        except BaseExc:
            text = name + (": " + value if value else "") + "\n"
        try:
            sys.stderr.write(text)
        except BaseExc:
            pass
        return {"name": name, "value": value, "traceback": text}

    def flush():
        for s in (sys.stdout, sys.stderr, real_stdout, real_stderr):
            try:
                s.flush()
            except BaseExc:
                pass

    main = types.ModuleType("__main__")
    main.__dict__.update(__builtins__=builtins, __spec__=None, __loader__=None, __annotations__={})
    modules["__main__"] = main
    del main
    # Whole lines reach the agent as one chunk, and nothing waits in a buffer when a cell ends.
    for s in (sys.stdout, sys.stderr):
        try:
            s.reconfigure(line_buffering=True, write_through=True)
        except BaseExc:
            pass
    # Warm what the first run would pay for.
    exec(compile("pass", "<string>", "exec", dont_inherit=True), {"__builtins__": builtins})
    report({"ready": sys.version.split()[0]})
    runs = 0
    while True:
        try:
            size = int.from_bytes(read_exact(4), "little")
            req = loads(read_exact(size))
            runs += 1
            environ.clear()
            environ.update(base_env)
            environ.update(req.get("env") or {})
            if req.get("chdir"):
                o_chdir(req["chdir"])
            code = req["code"]
            fname = "<run-%d>" % runs if req.get("session") else "<string>"
            lcache[fname] = (len(code), None, code.splitlines(True), fname)
            main = modules.get("__main__")
            if not isinstance(main, types.ModuleType):
                main = types.ModuleType("__main__")
                modules["__main__"] = main
            exit_code, error = 0, None
            try:
                o_signal(SIGINT, default_int_handler)
                exec(compile(code, fname, "exec", dont_inherit=True), main.__dict__)
                o_signal(SIGINT, SIG_IGN)
            except SysExit as e:
                o_signal(SIGINT, SIG_IGN)
                exit_code = exit_status(e)
            except BaseExc as e:
                o_signal(SIGINT, SIG_IGN)
                exit_code, error = 1, describe(e)
            del main, code, req
            flush()
            report({"exit": exit_code, "error": error})
        except KbdInt:
            # An interrupt that landed between the cell's end and its report.
            o_signal(SIGINT, SIG_IGN)
            flush()
            report({"exit": 1, "error": {"name": "KeyboardInterrupt", "value": "", "traceback": "KeyboardInterrupt\n"}})


_agentbox_repl()
