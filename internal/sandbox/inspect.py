def _agentbox_inspect():
    import json, os, sys, reprlib, hashlib
    r = reprlib.Repr()
    r.maxstring, r.maxother, r.maxlist, r.maxdict, r.maxlevel = 200, 200, 20, 20, 3
    out = {"variables": [], "files": [], "truncated": False}
    g = globals()
    names = sorted(k for k in g if not k.startswith("_"))
    if len(names) > @MAXVARS@:
        names, out["truncated"] = names[:@MAXVARS@], True
    for k in names:
        v = g[k]
        t = type(v)
        e = {"name": k, "type": t.__name__ if t.__module__ == "builtins" else t.__module__ + "." + t.__qualname__}
        if t.__name__ == "module":
            e["repr"] = "<module " + getattr(v, "__name__", k) + ">"
            out["variables"].append(e)
            continue
        try:
            if hasattr(v, "shape") and hasattr(v, "dtypes") and hasattr(v, "head") and hasattr(v, "memory_usage"):
                e["shape"] = [int(x) for x in v.shape]
                d = v.dtypes
                if hasattr(d, "items"):  # a DataFrame: a dtype per column
                    e["dtypes"] = {str(c): str(t) for c, t in list(d.items())[:50]}
                    e["head"] = v.head(5).to_string(max_cols=20, max_colwidth=40)[:4000]
                else:  # a Series: one dtype, under its name
                    e["dtypes"] = {str(getattr(v, "name", None) if getattr(v, "name", None) is not None else ""): str(d)}
                    e["head"] = v.head(5).to_string()[:4000]
                mu = v.memory_usage(index=True, deep=False)
                e["size"] = int(mu.sum() if hasattr(mu, "sum") else mu)
            else:
                if hasattr(v, "shape") and hasattr(v, "dtype"):
                    e["shape"] = [int(x) for x in v.shape]
                    e["size"] = int(getattr(v, "nbytes", 0))
                else:
                    e["size"] = sys.getsizeof(v)
                s = r.repr(v)
                e["repr"] = s[:@MAXREPR@]
        except Exception as x:
            e["repr"] = "<not shown: " + type(x).__name__ + ">"
        out["variables"].append(e)
    n = 0
    for root, dirs, files in os.walk("@WORKDIR@"):
        dirs.sort()
        for f in sorted(files):
            p = os.path.join(root, f)
            n += 1
            if n > @MAXFILES@:
                out["truncated"] = True
                break
            try:
                st = os.stat(p)
                e = {"path": p, "size": st.st_size}
                if st.st_size <= 4 << 20:
                    with open(p, "rb") as fh:
                        e["sha256"] = hashlib.sha256(fh.read()).hexdigest()
                out["files"].append(e)
            except OSError:
                pass
    sys.stdout.write(json.dumps(out))
_agentbox_inspect()
del _agentbox_inspect
