# The Python side of the guest agent (package guest, the init of VM-like sandboxes), run as
# `python3 -u -c REPL` by the agent as an unprivileged user. One process per sandbox keeps one __main__ namespace, so a session keeps its
# variables and imports between runs. Requests come on fd 3 and reports go to fd 4, each a 4-byte
# little-endian length and JSON; stdout and stderr are pipes the agent streams to the daemon.
# Everything the loop needs is bound to locals first, so user code that rebinds sys, os or json
# affects only itself.
#
# Besides its exit and error, a run reports:
#   - its figures: matplotlib figures shown with plt.show() or left open when the cell ends come
#     back as PNG artifacts, each in its own report ({"artifact": ...}) as soon as it is drawn, so
#     neither this process nor the agent holds them all at once. Matplotlib is not imported for
#     this: an import hook points it, when the code imports it, at a backend kept in this file.
#     Each PNG's report carries its chart: what the figure shows, read from its axes by
#     chart.py (CHART_SOURCE, run the first time a figure is sent).
#   - the value of its last expression, as Jupyter shows it: repr, _repr_html_, and JSON (a pandas
#     DataFrame's to_json(orient="table"), or _repr_json_), each bounded; nothing is printed.
#
# Startup imports only what an interpreter has loaded anyway or small C modules (_ast, binascii):
# in gVisor a process the code forks copies the parts of this one's memory that either touches, in
# pieces of up to 2 MiB, so what the REPL allocates is paid again by every fork.
import _ast
import _frozen_importlib
import _frozen_importlib_external
import _thread
import binascii
import builtins
import io
import json
import linecache
import os
import resource
import signal
import sys
import types

# The matplotlib backend the REPL sets when the code imports matplotlib (module://agentbox_inline).
# It draws with Agg; show() hands every open figure to the REPL, which sends it as a PNG artifact
# of the run and closes it. _agentbox_show is put into the module by the REPL.
BACKEND_SOURCE = '''
from matplotlib.backends.backend_agg import FigureCanvasAgg as FigureCanvas
from matplotlib.backend_bases import FigureManagerBase as FigureManager


def show(*args, **kwargs):
    """Return every open figure as a PNG artifact of the run, and close it."""
    _agentbox_show()
'''


# The source of chart.py, put here by the agent (package guest) in place of the next line.
# @CHART@


def _agentbox_repl(REQ=3, REP=4, BACKEND="agentbox_inline"):
    loads, dumps = json.loads, json.dumps
    o_read, o_write, o_exit, o_chdir, o_getpid = os.read, os.write, os._exit, os.chdir, os.getpid
    o_getcwd, o_makedirs = os.getcwd, os.makedirs
    o_rusage, r_self, r_kids = resource.getrusage, resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN
    # A child the code forked (os.fork() without exec) comes back into this loop with the REPL's
    # pipes: it must never report, or the agent would take its result for the cell's.
    pid0 = o_getpid()
    environ = os.environ
    base_env = dict(environ)
    modules = sys.modules
    real_stdout, real_stderr = sys.stdout, sys.stderr
    lcache = linecache.cache
    BaseExc, SysExit, KbdInt = BaseException, SystemExit, KeyboardInterrupt
    o_signal, o_getsignal, SIGINT, SIG_IGN = signal.signal, signal.getsignal, signal.SIGINT, signal.SIG_IGN
    default_int_handler = signal.default_int_handler
    parse_flags, Expr, Expression = _ast.PyCF_ONLY_AST, _ast.Expr, _ast.Expression
    BytesIO, b2a_base64 = io.BytesIO, binascii.b2a_base64
    get_ident, main_ident, write_lock = _thread.get_ident, _thread.get_ident(), _thread.allocate_lock()
    PathFinder, ModuleSpec = _frozen_importlib_external.PathFinder, _frozen_importlib.ModuleSpec
    meta_path = sys.meta_path
    Exc, OSErr = Exception, OSError
    # What one run may return; the agent sends its own caps with each request.
    limits = {"artifacts": 64, "artifact_bytes": 32 << 20, "text": 64 << 10, "html": 1 << 20, "json": 4 << 20,
              "chart_bytes": 512 << 10}
    # What a figure's chart holds at most (chart.py).
    chart_caps = {"elements": 100, "points": 1000, "total_points": 10000, "ticks": 100, "label": 200}
    chart_code = {}  # chart.py's namespace, once a figure was sent
    figs = {"kept": 0, "bytes": 0, "dropped": 0}  # this run's artifacts
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
        if o_getpid() != pid0:
            if "exit" in msg:
                flush()
                o_exit(msg["exit"] & 0xFF)
            return
        try:
            data = dumps(msg).encode()
            # One write for the length and the report: each system call costs the sandbox
            # ~20 µs of CPU under gVisor, and the agent reads the report in one.
            mv = memoryview(len(data).to_bytes(4, "little") + data)
            with write_lock:
                while mv:
                    mv = mv[o_write(REP, mv):]
        except BaseExc:
            o_exit(125)  # the agent sees the process end: a broken REPL

    def report_in_cell(msg):
        # A report written while code runs (an artifact) must not be cut by KeyboardInterrupt:
        # the interrupt waits until the report is out. Only the main thread gets signals.
        if get_ident() != main_ident:
            report(msg)
            return
        interrupted = []
        previous = o_signal(SIGINT, lambda signum, frame: interrupted.append(signum))
        try:
            report(msg)
        finally:
            o_signal(SIGINT, previous)
        if interrupted and callable(previous):
            previous(SIGINT, None)

    def note(text):
        try:
            real_stderr.write("[agentbox] " + text + "\n")
            real_stderr.flush()
        except BaseExc:
            pass

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

    # An exception that ends a cell: its record, the traceback less the loop's own frame, echoed
    # to stderr (package pyerror; the interrupt's C handler adds no frame to leave out).
    describe = _agentbox_pyerror()

    def flush():
        for s in (sys.stdout, sys.stderr, real_stdout, real_stderr):
            try:
                s.flush()
            except BaseExc:
                pass

    def describe_exc(e):
        try:
            return "%s: %s" % (type(e).__name__, e)
        except BaseExc:
            return type(e).__name__

    # Figures. Only pyplot's figures are "open" (Gcf); matplotlib is looked up in sys.modules, never
    # imported here, and what the code does to its own names (plt, show) does not matter.
    def send_figure(fig):
        if figs["kept"] >= limits["artifacts"]:
            figs["dropped"] += 1
            return
        buf = BytesIO()
        fig.savefig(buf, format="png")
        data = buf.getvalue()
        del buf
        if figs["bytes"] + len(data) > limits["artifact_bytes"]:
            figs["dropped"] += 1
            return
        chart = figure_chart(fig)
        if chart is not None and figs["bytes"] + len(data) + chart[1] > limits["artifact_bytes"]:
            chart = None
        figs["kept"] += 1
        figs["bytes"] += len(data)
        name = "figure-%d.png" % figs["kept"]
        artifact = {"name": name, "mime": "image/png", "content": b2a_base64(data, newline=False).decode("ascii")}
        if chart is not None:
            figs["bytes"] += chart[1]
            artifact["chart"] = chart[0]
        report_in_cell({"artifact": artifact})

    def figure_chart(fig):
        # The figure's chart and the size of its JSON, or None (no axes, or it could not be
        # read). Called after savefig, so the axes' tick labels are set. A chart over chart_bytes (long labels
        # on many axes) is sent as its type and title alone, marked truncated.
        try:
            if not chart_code:
                exec(compile(CHART_SOURCE, "<agentbox_chart>", "exec", dont_inherit=True), chart_code)
            chart = chart_code["figure_chart"](fig, chart_caps)
            if chart is None:
                return None
            size = len(dumps(chart, allow_nan=False).encode())
            if size > limits["chart_bytes"]:
                chart = {"type": chart.get("type", "unknown"), "title": str(chart.get("title", ""))[:200],
                         "elements": [], "truncated": True}
                size = len(dumps(chart).encode())
            return chart, size
        except Exc as e:
            note("the chart of a figure could not be read: %s" % describe_exc(e))
            return None

    def open_figures():
        helpers = modules.get("matplotlib._pylab_helpers")
        if helpers is None:
            return None, []
        return helpers.Gcf, helpers.Gcf.get_all_fig_managers()

    def show_figures(strict):
        # Sends every open figure and closes them all. plt.show() is strict: a figure that cannot
        # be drawn raises there, as savefig would; at the end of a run it is a note on stderr.
        gcf, managers = open_figures()
        try:
            for m in managers:
                try:
                    send_figure(m.canvas.figure)
                except Exc as e:
                    if strict:
                        raise
                    note("figure %s could not be drawn: %s" % (m.num, describe_exc(e)))
        finally:
            if managers:
                gcf.destroy_all()

    def end_figures(draw):
        # At the end of a run, open figures are sent, as Jupyter's inline backend does; after an
        # interrupt (or a timeout) there is no time to draw them, and they are closed.
        try:
            if draw:
                # Interruptible while the figures are drawn; after a cell that ended normally
                # the handler is already there (each change is a system call: rawio.go).
                if o_getsignal(SIGINT) is not default_int_handler:
                    o_signal(SIGINT, default_int_handler)
                show_figures(False)
            else:
                gcf, managers = open_figures()
                if managers:
                    gcf.destroy_all()
                    note("%d open figure(s) closed without being drawn: the run was interrupted" % len(managers))
        except KbdInt:
            gcf, managers = open_figures()
            if managers:
                gcf.destroy_all()
            note("figures not drawn: the run was interrupted")
        finally:
            o_signal(SIGINT, SIG_IGN)
        if figs["dropped"]:
            note("%d figure(s) dropped: a run returns at most %d artifacts and %d MiB of them"
                 % (figs["dropped"], limits["artifacts"], limits["artifact_bytes"] >> 20))

    class BackendLoader:
        """Makes the agentbox_inline backend module from BACKEND_SOURCE."""

        def create_module(self, spec):
            return None

        def exec_module(self, module):
            module._agentbox_show = lambda: show_figures(True)
            exec(compile(BACKEND_SOURCE, "<agentbox_inline>", "exec", dont_inherit=True), module.__dict__)

    def dns_hint():
        if environ.get("HTTPS_PROXY") or environ.get("https_proxy"):
            return ("agentbox: this sandbox reaches the network only through the egress gateway's proxy "
                    "(HTTPS_PROXY), which HTTP clients such as requests, urllib and pip use by themselves; "
                    "names are resolved there, not in the sandbox")
        return ("agentbox: this sandbox has no network; ask for it with network: true on the run or session "
                "(SandboxConfig(network=True) in the Python SDK, {network: true} in the JS SDK): it then "
                "reaches out through the egress gateway, where the egress profile decides what is allowed")

    def patch_socket(module):
        """Makes a failed name resolution say why the sandbox cannot resolve names and what to do,
        instead of a bare "Temporary failure in name resolution". The errno stays the same."""
        gaierror = module.gaierror

        def explained(f):
            def resolve(*args, **kwargs):
                try:
                    return f(*args, **kwargs)
                except gaierror as e:
                    if e.errno in (-2, -3, -4, -5) and "agentbox:" not in str(e.strerror):  # EAI_NONAME, AGAIN, FAIL, NODATA
                        raise gaierror(e.errno, "%s (%s)" % (e.strerror, dns_hint())) from None
                    raise
            resolve.__name__ = resolve.__qualname__ = f.__name__
            resolve.__doc__ = f.__doc__
            resolve.__wrapped__ = f
            return resolve

        for name in ("getaddrinfo", "gethostbyname", "gethostbyname_ex"):
            f = getattr(module, name, None)
            if f is not None:
                setattr(module, name, explained(f))

    class PatchLoader:
        """Loads a module as usual, then calls after(module). The module keeps its own loader."""

        def __init__(self, inner, after):
            self.inner = inner
            self.after = after

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def create_module(self, spec):
            return self.inner.create_module(spec)

        def exec_module(self, module):
            try:
                self.inner.exec_module(module)
            finally:
                module.__loader__ = self.inner
                if module.__spec__ is not None:
                    module.__spec__.loader = self.inner
            try:
                self.after(module)
            except Exc:
                pass

    def use_inline_backend(module):
        # matplotlib draws with agentbox_inline unless the run's environment chose another
        # backend (MPLBACKEND).
        if environ.get("MPLBACKEND") == base_env.get("MPLBACKEND"):
            module.rcParams["backend"] = "module://" + BACKEND

    backend_loader = BackendLoader()

    class Finder:
        """Finds the backend module, and hooks the imports of matplotlib and socket; asks nothing
        of any other."""

        def find_spec(self, name, path=None, target=None):
            if name == BACKEND:
                return ModuleSpec(name, backend_loader)
            if name == "socket":
                spec = PathFinder.find_spec(name, path, target)
                if spec is not None and spec.loader is not None:
                    spec.loader = PatchLoader(spec.loader, patch_socket)
                return spec
            if name != "matplotlib":
                return None
            spec = PathFinder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = PatchLoader(spec.loader, use_inline_backend)
            return spec

    meta_path.insert(0, Finder())

    # The value of a run's last expression.
    def last_expression(tree, code):
        # Takes a trailing expression statement off the module; a trailing semicolon hides the
        # value, as in Jupyter.
        body = tree.body
        if not body or not isinstance(body[-1], Expr):
            return None
        node = body[-1]
        try:
            rest = code.split("\n")[node.end_lineno - 1].encode("utf-8", "surrogatepass")[node.end_col_offset:]
        except Exc:
            rest = b""
        if rest.lstrip(b" \t").startswith(b";"):
            return None
        body.pop()
        return Expression(node.value)

    def fits(s, cap):
        return len(s) <= cap and (len(s) * 4 <= cap or len(s.encode("utf-8", "surrogatepass")) <= cap)

    def bound_text(s, cap):
        if fits(s, cap):
            return s
        marker = " …[truncated]"
        return s[:cap].encode("utf-8", "surrogatepass")[:cap - len(marker.encode())].decode("utf-8", "ignore") + marker

    def rich(value, method):
        try:
            f = getattr(value, method, None)
            if f is None or not callable(f):
                return None
            r = f()
            if isinstance(r, tuple):  # (data, metadata), as IPython allows
                r = r[0] if r else None
            return r
        except Exc as e:
            note("%s() of the value failed: %s" % (method, describe_exc(e)))
            return None

    def represent(value, text):
        out = {"text": bound_text(text, limits["text"])}
        try:
            if isinstance(value, type) or getattr(value, "_agentbox_no_such_attribute_", None) is not None:
                return out  # a class, or an object that claims every attribute
        except Exc:
            return out
        html = rich(value, "_repr_html_")
        if isinstance(html, str) and fits(html, limits["html"]):
            out["html"] = html
        js = None
        pd = modules.get("pandas")
        try:
            frame = pd is not None and isinstance(value, (pd.DataFrame, pd.Series))
        except Exc:
            frame = False
        if frame:
            # Each cell costs at least 5 bytes of JSON ("c":1,): a frame that cannot fit is not
            # converted at all.
            try:
                cells = len(value) * ((value.shape[1] if value.ndim > 1 else 1) + 1)
                if cells * 5 <= limits["json"]:
                    js = value.to_json(orient="table")
            except Exc as e:
                note("to_json() of the value failed: %s" % describe_exc(e))
        else:
            data = rich(value, "_repr_json_")
            if data is not None:
                try:
                    js = data if isinstance(data, str) else dumps(data, allow_nan=False)
                except Exc as e:
                    note("_repr_json_() of the value is not JSON: %s" % describe_exc(e))
        if isinstance(js, str) and fits(js, limits["json"]):
            out["json"] = js
        # A figure made without pyplot is not open anywhere: its value is its picture.
        mfigure = modules.get("matplotlib.figure")
        try:
            if mfigure is not None and isinstance(value, mfigure.Figure) and getattr(value.canvas, "manager", None) is None:
                send_figure(value)
        except Exc as e:
            note("the figure could not be drawn: %s" % describe_exc(e))
        return out

    def new_main():
        main = types.ModuleType("__main__")
        main.__dict__.update(__builtins__=builtins, __spec__=None, __loader__=None, __annotations__={})
        return main

    # Code contexts (sandbox.RunRequest.Context): each has a __main__ module of its own, its
    # variables, and a working directory of its own, kept here between its cells; "" is the main
    # context. A cell runs with its context's module as sys.modules["__main__"] (so pickle and
    # dataclasses find what it defines) and in its directory; between cells the main context's
    # module is __main__ again. Everything else (imported modules, files, processes) is shared.
    spaces = {"": new_main()}
    home = o_getcwd()
    dirs = {"": home}
    modules["__main__"] = spaces[""]
    current = [""]  # the context whose directory the process is in

    def enter(ctx, start_dir):
        # Returns ctx's module, made (in start_dir, created if missing) when ctx has none; puts
        # the process in ctx's directory. Raises what making or entering the directory raises.
        main = spaces.get(ctx)
        if main is None:
            if start_dir:
                o_makedirs(start_dir, exist_ok=True)
                o_chdir(start_dir)
            main = spaces[ctx] = new_main()
            dirs[ctx] = start_dir or home
            current[0] = ctx
        elif current[0] != ctx:
            current[0] = ctx
            try:
                o_chdir(dirs.get(ctx) or home)
            except OSErr as e:
                note("this context's working directory %s is gone (%s): it is in %s now" % (dirs.get(ctx), describe_exc(e), home))
                o_chdir(home)
                dirs[ctx] = home
        modules["__main__"] = main
        return main

    def leave(ctx, end):
        # Keeps what ctx's cell left (its __main__, its directory), and the main context's
        # module as __main__ between cells.
        main = modules.get("__main__")
        if ctx in spaces and isinstance(main, types.ModuleType):
            spaces[ctx] = main
        try:
            if ctx in spaces:
                dirs[ctx] = o_getcwd()
        except OSErr:
            pass
        if end and ctx:
            spaces.pop(ctx, None)
            dirs.pop(ctx, None)
        modules["__main__"] = spaces.get("") or spaces.setdefault("", new_main())
    # Whole lines reach the agent as one chunk, and nothing waits in a buffer when a cell ends.
    for s in (sys.stdout, sys.stderr):
        try:
            s.reconfigure(line_buffering=True, write_through=True)
        except BaseExc:
            pass
    # Warm what the first run would pay for.
    warm = compile("None", "<string>", "exec", parse_flags, dont_inherit=True)
    exec(compile(warm, "<string>", "exec", dont_inherit=True), {"__builtins__": builtins})
    del warm
    # Snapshots (package guest, snaps.go): {"fork": 1} forks this process; the child parks, with
    # SIGUSR1 blocked, in a process group of its own (so the live worker's interrupts and kills
    # do not reach it) and waits for SIGUSR1. The agent wakes it for a rewind after ending the
    # live worker: it goes on as the live worker on the same pipes, reporting {"woke": pid}, and
    # the agent then asks it for a fork that parks in its place (so the step stays available).
    o_fork, o_setpgid, thread_count = os.fork, os.setpgid, _thread._count
    FORKED_HEAD = b'{"forked": '
    sigmask, sigwait = signal.pthread_sigmask, signal.sigwait
    # A quiet fork (OpSnapshot's Quiet) is made with SIGUSR2 blocked too: gVisor (the agentbox
    # patch, mm/copy_behind.go) then leaves the child no copy-behind work, and for a moment both
    # processes' writes copy only the pages they touch instead of 2 MiB each.
    QUIET = {signal.SIGUSR2}
    SIG_BLOCK, SIG_UNBLOCK, WAKE = signal.SIG_BLOCK, signal.SIG_UNBLOCK, {signal.SIGUSR1}

    # After a fork the live process pays for its first touches of memory (gVisor maps it again
    # and copies 2 MiB per first write): ~20 ms for the next cell of a pandas session. Touching
    # what every cell touches (the compiler, small objects, the globals' headers) right after the
    # fork, behind the snapshot's report, takes about half of that off the next cell.
    warm_code = compile("w = [str(i) for i in range(2000)]\nd = {i: i for i in range(2000)}\ndel w, d\n",
                        "<agentbox-warm>", "exec", dont_inherit=True)

    # The snapshots this process forked: the agent kills those it drops, and they stay zombies
    # (each holding a pid, which RLIMIT_NPROC counts) until this process waits for them.
    snap_kids = []
    o_waitpid, WNOHANG = os.waitpid, os.WNOHANG

    def reap_snaps():
        for kid in snap_kids[:]:
            try:
                done = o_waitpid(kid, WNOHANG)[0]
            except OSErr:  # not this process's child (a woken copy inherited the list)
                done = True
            if done:
                snap_kids.remove(kid)

    def warm():
        try:
            reap_snaps()
            exec(warm_code, {"__builtins__": builtins})
            main = modules.get("__main__")
            if main is not None:
                for v in list(main.__dict__.values()):
                    pass
        except BaseExc:
            pass

    def cpu_now():
        # The process's CPU time and its waited-for children's, from getrusage(2): microseconds,
        # where times(2) counts 10 ms ticks and truncates user and system time apart (a cell busy
        # for 50 ms read as 40).
        s, c = o_rusage(r_self), o_rusage(r_kids)
        return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime

    def cpu_since(t):
        return cpu_now() - t

    def park():
        # In the parked child; returns when it is woken.
        o_setpgid(0, 0)
        sigwait(WAKE)
        sigmask(SIG_UNBLOCK, WAKE)

    def fork_here(quiet=False):
        # A snapshot: the parent reports the child and goes on; the child parks and returns when
        # it is woken for a rewind, as the live process. quiet (OpSnapshot's Quiet): the session
        # is idle and the snapshot stands in for its latest step's, to share the live process's
        # memory: the fork is quiet (QUIET) and the parent does not warm itself.
        nonlocal pid0
        flush()
        # The code's threads still running are not in the child (a fork copies the calling
        # thread only): the agent notes how many on the step. Counted and formatted before the
        # fork, with the report's frame around the child's pid: after the fork, gVisor copies
        # 2 MiB of this process at its first write to each piece it shares with the child
        # (refcounts, allocations, ~1 ms each on a loaded machine), and the snapshot is
        # waited for until this report is out, so it goes out first, touching what little
        # it must (a full report, the mask's change and a JSON dump took ~10 ms there, this
        # ~3 ms); the rest comes after it.
        threads = thread_count()
        tail = (', "threads": %d}' % threads).encode()
        size = len(FORKED_HEAD) + 10 + len(tail)
        head = size.to_bytes(4, "little") + FORKED_HEAD
        sigmask(SIG_BLOCK, WAKE)
        # SIGUSR2 is the code's: unblocked after the fork only if it was not blocked before (a
        # signal the code holds back must stay held back, not be delivered by an idle release).
        unquiet = quiet and not (QUIET & sigmask(SIG_BLOCK, QUIET))
        try:
            child = o_fork()
        except BaseExc as e:
            if unquiet:
                sigmask(SIG_UNBLOCK, QUIET)
            sigmask(SIG_UNBLOCK, WAKE)
            report({"forked": 0, "error": describe_exc(e)})
            return
        if child:
            try:
                with write_lock:  # the frame in one write (a thread of the code may report)
                    o_write(REP, head + str(child).encode().rjust(10) + tail)
            except BaseExc:
                o_exit(125)
            # The child moves to a group of its own as it parks, and so does this: whichever
            # comes first. (The agent waits for it before it ends the live group: snaps.go.)
            try:
                o_setpgid(child, child)
            except OSErr:
                pass
            sigmask(SIG_UNBLOCK, WAKE)
            snap_kids.append(child)
            if unquiet:
                sigmask(SIG_UNBLOCK, QUIET)
            if not quiet:
                warm()  # a request sent meanwhile waits in the pipe
            return
        if unquiet:
            sigmask(SIG_UNBLOCK, QUIET)
        park()
        pid0 = o_getpid()
        report({"woke": pid0})

    def end_cell(ctx, end):
        # What every cell's end does, whichever way it ended: keeps what ctx's cell left (or ends
        # ctx), and takes the run's environment (the session's secrets among it) out of the
        # process, so no snapshot between cells keeps it: the next cell sets its own again.
        try:
            leave(ctx, end)
        finally:
            environ.clear()
            environ.update(base_env)

    report({"ready": sys.version.split()[0]})
    runs = 0
    ending = None  # (context, end) of the cell begun and not yet ended (end_cell)
    while True:
        try:
            size = int.from_bytes(read_exact(4), "little")
            req = loads(read_exact(size))
            if "reap" in req:
                # The agent saw a snapshot it killed end after this process last reaped
                # (snaps.go, collect).
                req = None
                reap_snaps()
                report({"reaped": 1})
                continue
            if "fork" in req:
                quiet = bool(req.get("quiet"))
                req = None
                fork_here(quiet)
                continue
            limits.update(req.get("limits") or {})
            ctx = req.get("context") or ""
            if ctx and ctx not in spaces and len(spaces) > limits.get("contexts", 32):
                report({"refused": "this sandbox's interpreter holds %d code contexts besides its main one, the most it may: "
                        "end one (its removal) before making another" % (len(spaces) - 1)})
                continue
            if req.get("context_reset"):
                spaces.pop(ctx, None)
                dirs.pop(ctx, None)
                if current[0] == ctx:
                    current[0] = None
            start_dir = req.get("context_dir") if ctx not in spaces else None
            runs += 1
            cpu0 = cpu_now()
            environ.clear()
            environ.update(base_env)
            environ.update(req.get("env") or {})
            if req.get("chdir"):
                o_chdir(req["chdir"])
            figs.update(kept=0, bytes=0, dropped=0)
            code = req["code"]
            fname = "<run-%d>" % runs if req.get("session") else "<string>"
            lcache[fname] = (len(code), None, code.splitlines(True), fname)
            exit_code, error, outputs, value = 0, None, None, None
            ending = (ctx, req.get("context_end"))
            try:
                main, entered = enter(ctx, start_dir), None
            except BaseExc as e:
                # A context's directory that cannot be made: the cell's error, without this
                # file's frames.
                main, entered = None, e
                entered.__traceback__ = None
            # The code and its last expression run in this frame, which describe() leaves out of
            # tracebacks; both are compiled under fname, so line numbers are the cell's.
            try:
                o_signal(SIGINT, default_int_handler)
                if entered is not None:
                    raise entered
                tree = compile(code, fname, "exec", parse_flags, dont_inherit=True)
                last = last_expression(tree, code)
                exec(compile(tree, fname, "exec", dont_inherit=True), main.__dict__)
                if last is not None:
                    value = eval(compile(last, fname, "eval", dont_inherit=True), main.__dict__)
                    if value is not None:
                        outputs = [represent(value, repr(value))]
                end_figures(True)
            except SysExit as e:
                o_signal(SIGINT, SIG_IGN)
                exit_code = exit_status(e)
                end_figures(True)
            except KbdInt as e:
                o_signal(SIGINT, SIG_IGN)
                exit_code, error = 1, describe(e)
                end_figures(False)
            except BaseExc as e:
                o_signal(SIGINT, SIG_IGN)
                exit_code, error = 1, describe(e)
                end_figures(True)
            end_cell(ctx, req.get("context_end"))
            ending = None
            main = code = req = tree = last = value = entered = None
            flush()
            report({"exit": exit_code, "error": error, "outputs": outputs, "cpu": cpu_since(cpu0)})
        except KbdInt:
            # An interrupt that landed between the cell's end and its report, or escaped the
            # handling of its end (as the cell raised, before SIGINT was ignored again): the
            # cell's end is done here if it was not.
            o_signal(SIGINT, SIG_IGN)
            if ending is not None:
                try:
                    end_cell(*ending)
                except BaseExc:
                    pass
                ending = None
            main = code = req = tree = last = value = entered = None
            flush()
            report({"exit": 1, "error": {"name": "KeyboardInterrupt", "value": "", "traceback": "KeyboardInterrupt\n"}})


# The exception formatter shared with the other tiers' drivers (package pyerror): the agent puts
# its source, which defines _agentbox_pyerror, in place of the next line.
# @PYERROR@

_agentbox_repl()
