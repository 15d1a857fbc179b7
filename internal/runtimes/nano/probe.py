# The module probe: what can this CPython build import? Run by `agentbox setup` (and by the daemon
# when the record is missing) inside the nano interpreter itself; see modules.go.
#
# Candidates are sys.stdlib_module_names, sys.builtin_module_names and every top-level module on
# sys.path, then the submodules of each package that imported. Each is imported; what raises is
# recorded with its error. Two kinds of module are not imported, by rule rather than by name:
# __main__ submodules (importing one runs a program) and packages' own test suites (test, tests,
# idle_test), which are not for user code. Output the modules print while importing is swallowed;
# the one line of JSON this script prints is the result.
import builtins
import importlib
import io
import json
import pkgutil
import sys


def probe():
    out, err = sys.stdout, sys.stderr
    ok, bad = set(), {}

    def attempt(name):
        sys.stdout, sys.stderr = io.StringIO(), io.StringIO()
        try:
            importlib.import_module(name)
        except BaseException as e:
            bad[name] = "%s: %s" % (type(e).__name__, e)
            return False
        finally:
            sys.stdout, sys.stderr = out, err
        ok.add(name)
        return True

    def skipped(name):
        last = name.rsplit(".", 1)[-1]
        return last == "__main__" or last in ("test", "tests", "idle_test")

    names = set(sys.stdlib_module_names) | set(sys.builtin_module_names)
    names.update(m.name for m in pkgutil.iter_modules())
    packages = []
    for name in sorted(names):
        if skipped(name):
            continue
        if attempt(name) and hasattr(sys.modules.get(name), "__path__"):
            packages.append(name)
    for pkg in packages:
        path = getattr(sys.modules.get(pkg), "__path__", None)
        if path is None:
            continue
        for m in pkgutil.walk_packages(path, pkg + ".", onerror=lambda name: None):
            if any(skipped(part) for part in m.name.split(".")):
                continue
            if m.name not in ok and m.name not in bad:
                attempt(m.name)
    return {
        "python": sys.version,
        "version": list(sys.version_info[:3]),
        "platform": sys.platform,
        "available": sorted(ok),
        "unavailable": bad,
    }


builtins.print(json.dumps(probe()))
