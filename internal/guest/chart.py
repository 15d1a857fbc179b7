# The chart of a matplotlib figure: what the figure shows, read from its axes, as the code
# interpreter's "chart" result (the shape E2B's SDKs type as ChartTypes). The REPL (repl.py) runs
# this source once, the first time a figure is sent, and calls figure_chart(fig, caps) for each
# figure after drawing it (so tick labels are set). It imports only what matplotlib has already
# loaded. Anything it cannot read becomes a chart of type "unknown" (never an error of the run).
#
# Types: one axes is a line chart (only lines), a scatter chart (only point collections), a bar
# chart (bar containers), a pie chart (only wedges), a box-and-whisker chart (boxplot's boxes,
# whiskers, caps, medians and fliers) or "unknown"; a figure with several axes is a "superchart"
# whose elements are its axes' charts.
#
# Bounds (caps): at most caps["elements"] elements a chart (lines, bars, wedges, boxes; axes of a
# superchart), caps["points"] points a line or point collection (evenly sampled, first and last
# kept), caps["total_points"] points a figure, caps["ticks"] ticks an axis, caps["label"]
# characters a label. A chart that was cut says so: "truncated": true.
import sys as _sys

_CHILD_PREFIXES = (("_child", "Line"), ("_container", "Group"))


class _Budget:
    def __init__(self, caps):
        self.caps = caps
        self.points = caps["total_points"]
        self.truncated = False


def _num(v):
    """A JSON number for v (None for NaN, infinity or something that is not a number)."""
    try:
        f = float(v)
    except Exception:
        return None
    if f != f or f in (float("inf"), float("-inf")):
        return None
    if f == int(f) and abs(f) < 2 ** 53:
        return float(int(f))
    return f


def _value(v, date_axis):
    """A point's coordinate: a number, or a string for a date or a category."""
    if isinstance(v, str):
        return v
    np = _sys.modules.get("numpy")
    if np is not None:
        if isinstance(v, np.datetime64):
            return str(v.astype("datetime64[s]"))
        if isinstance(v, np.str_):
            return str(v)
    iso = getattr(v, "isoformat", None)
    if iso is not None and callable(iso):
        try:
            return iso()
        except Exception:
            return str(v)
    if date_axis:
        n = _num(v)
        if n is not None:
            try:
                return _sys.modules["matplotlib.dates"].num2date(n).isoformat()
            except Exception:
                return n
    return _num(v)


def _text(s, budget):
    s = "" if s is None else str(s)
    cap = budget.caps["label"]
    if len(s) > cap:
        budget.truncated = True
        return s[:cap]
    return s


def _label(artist, budget):
    label = artist.get_label() or ""
    for prefix, word in _CHILD_PREFIXES:
        if label.startswith(prefix) and label[len(prefix):].isdigit():
            return "%s %s" % (word, label[len(prefix):])
    return _text(label, budget)


def _converter(axis):
    get = getattr(axis, "get_converter", None)
    return get() if get is not None else getattr(axis, "converter", None)


def _is_date_axis(axis):
    conv = _converter(axis)
    mdates = _sys.modules.get("matplotlib.dates")
    if conv is None or mdates is None:
        return False
    kinds = tuple(k for k in (getattr(mdates, n, None) for n in ("DateConverter", "_SwitchableDateConverter", "ConciseDateConverter")) if isinstance(k, type))
    return bool(kinds) and isinstance(conv, kinds)


def _categories(axis):
    """The category of each position of a categorical axis (position -> name), or None."""
    cat = _sys.modules.get("matplotlib.category")
    units = getattr(axis, "units", None)
    if cat is None or not isinstance(units, getattr(cat, "UnitData", ())):
        return None
    return {int(v): str(k) for k, v in units._mapping.items()}


def _scale(axis, scale):
    if _is_date_axis(axis):
        return "datetime"
    if _categories(axis) is not None:
        return "categorical"
    return scale


def _unit(label):
    """The unit of an axis label written "Label (unit)" or "Label [unit]", else None."""
    label = label.strip()
    for open_, close in (("(", ")"), ("[", "]")):
        if label.endswith(close) and open_ in label:
            unit = label[label.rindex(open_) + 1:-1].strip()
            if unit:
                return unit
    return None


def _axes2d(ax, kind, budget, swap=False):
    x, y = ax.get_xlabel(), ax.get_ylabel()
    if swap:
        x, y = y, x
    return {"type": kind, "title": _text(ax.get_title(), budget), "x_label": _text(x, budget), "y_label": _text(y, budget),
            "x_unit": _unit(x), "y_unit": _unit(y), "elements": []}


def _ticks(ax, budget):
    out = {}
    cap = budget.caps["ticks"]
    for name, axis, scale in (("x", ax.xaxis, ax.get_xscale()), ("y", ax.yaxis, ax.get_yscale())):
        date = _is_date_axis(axis)
        ticks = list(axis.get_ticklocs())
        labels = [t.get_text() for t in axis.get_ticklabels()]
        if len(ticks) > cap or len(labels) > cap:
            budget.truncated = True
        out[name + "_ticks"] = [_value(t, date) for t in ticks[:cap]]
        out[name + "_tick_labels"] = [_text(t, budget) for t in labels[:cap]]
        out[name + "_scale"] = _scale(axis, scale)
    return out


def _sample(xs, ys, budget):
    """Pairs of xs and ys within the point caps: evenly spaced, the first and last kept."""
    n = min(len(xs), len(ys))
    cap = max(0, min(budget.caps["points"], budget.points))
    if n <= cap:
        idx = range(n)
    else:
        budget.truncated = True
        if cap == 0:
            idx = []
        elif cap == 1:
            idx = [0]
        else:
            idx = sorted({round(i * (n - 1) / (cap - 1)) for i in range(cap)})
    idx = list(idx)
    budget.points -= len(idx)
    return [(xs[i], ys[i]) for i in idx]


def _point_chart(ax, kind, budget):
    c = _axes2d(ax, kind, budget)
    c.update(_ticks(ax, budget))
    xdate, ydate = _is_date_axis(ax.xaxis), _is_date_axis(ax.yaxis)
    xcat, ycat = _categories(ax.xaxis), _categories(ax.yaxis)

    def coord(v, date, cats):
        if cats is not None and not isinstance(v, str):
            n = _num(v)
            if n is not None and n == int(n) and int(n) in cats:
                return cats[int(n)]
        return _value(v, date)

    series = []
    if kind == "line":
        for line in ax.get_lines():
            series.append((_label(line, budget), line.get_xdata(), line.get_ydata()))
    else:
        for coll in ax.collections:
            offsets = coll.get_offsets()
            if getattr(offsets, "ndim", 0) == 2:
                xs, ys = offsets[:, 0], offsets[:, 1]
            else:
                xs, ys = [p[0] for p in offsets], [p[1] for p in offsets]
            series.append((_label(coll, budget).replace("Line ", "Series ", 1), xs, ys))
    cap = budget.caps["elements"]
    if len(series) > cap:
        budget.truncated = True
    for label, xs, ys in series[:cap]:
        points = [[coord(x, xdate, xcat), coord(y, ydate, ycat)] for x, y in _sample(xs, ys, budget)]
        c["elements"].append({"label": label, "points": points})
    return c


def _bar_chart(ax, budget):
    bars = [b for b in ax.containers if type(b).__name__ == "BarContainer"]
    horizontal = False
    if bars:
        o = getattr(bars[0], "orientation", None)
        if o in ("horizontal", "vertical"):
            horizontal = o == "horizontal"
        else:
            rects = list(bars[0])
            horizontal = len(rects) > 1 and all(r.get_height() == rects[0].get_height() for r in rects) and \
                not all(r.get_width() == rects[0].get_width() for r in rects)
    c = _axes2d(ax, "bar", budget, swap=horizontal)
    axis = ax.yaxis if horizontal else ax.xaxis
    cats = _categories(axis)
    ticks = {}
    try:
        for loc, lab in zip(axis.get_ticklocs(), axis.get_ticklabels()):
            ticks[round(float(loc), 6)] = lab.get_text()
    except Exception:
        pass
    date = _is_date_axis(axis)
    cap = budget.caps["elements"]
    for n, container in enumerate(bars):
        group = _label(container, budget)
        for rect in container:
            if len(c["elements"]) >= cap:
                budget.truncated = True
                return c
            if horizontal:
                pos, value = rect.get_y() + rect.get_height() / 2, rect.get_width()
            else:
                pos, value = rect.get_x() + rect.get_width() / 2, rect.get_height()
            key = round(float(pos), 6)
            if cats is not None and key == int(key) and int(key) in cats:
                label = cats[int(key)]
            elif ticks.get(key):
                label = ticks[key]
            else:
                v = _value(pos, date)
                label = v if isinstance(v, str) else ("%g" % v if v is not None else "")
            c["elements"].append({"label": _text(label, budget), "group": group, "value": _num(value)})
    return c


def _pie_chart(ax, budget):
    c = {"type": "pie", "title": _text(ax.get_title(), budget), "elements": []}
    wedges = [p for p in ax.patches if type(p).__name__ == "Wedge"]
    cap = budget.caps["elements"]
    if len(wedges) > cap:
        budget.truncated = True
    for w in wedges[:cap]:
        c["elements"].append({"label": _text(w.get_label(), budget), "angle": _num(round(abs(w.theta2 - w.theta1), 4)), "radius": _num(w.r)})
    return c


def _rect_of(xs, ys):
    """The rectangle (x0, x1, y0, y1) a closed axis-aligned path of 5 points draws, or None."""
    if len(xs) != 5 or len(ys) != 5 or xs[0] != xs[4] or ys[0] != ys[4]:
        return None
    if len(set(xs)) != 2 or len(set(ys)) != 2:
        return None
    return min(xs), max(xs), min(ys), max(ys)


def _floats(seq):
    out = []
    for v in seq:
        n = _num(v)
        if n is None:
            return None
        out.append(n)
    return out


def _boxes(ax):
    """Boxplot's boxes (x0, x1, y0, y1), from PathPatch boxes (patch_artist=True) or from lines
    of 5 points drawing a rectangle; and the other lines. No line's data is copied here."""
    boxes = []
    for p in ax.patches:
        if type(p).__name__ == "PathPatch":
            v = p.get_path().vertices
            xs, ys = _floats(v[:, 0]), _floats(v[:, 1])
            if xs and ys:
                boxes.append([min(xs), max(xs), min(ys), max(ys)])
    patches = bool(boxes)
    lines = []
    for line in ax.get_lines():
        r = None
        if not patches and len(line.get_xdata()) == 5:
            xs, ys = _floats(line.get_xdata()), _floats(line.get_ydata())
            r = _rect_of(xs, ys) if xs is not None and ys is not None else None
        if r is not None:
            boxes.append(list(r))
        else:
            lines.append(line)
    return boxes, lines


def _box_chart(ax, budget):
    boxes, lines = _boxes(ax)
    # Vertical boxes share their width (x); horizontal ones their height (y).
    widths = {round(b[1] - b[0], 9) for b in boxes}
    heights = {round(b[3] - b[2], 9) for b in boxes}
    vertical = len(widths) <= len(heights)
    c = _axes2d(ax, "box_and_whisker", budget, swap=not vertical)
    axis = ax.xaxis if vertical else ax.yaxis
    ticks = {}
    try:
        for loc, lab in zip(axis.get_ticklocs(), axis.get_ticklabels()):
            ticks[round(float(loc), 6)] = lab.get_text()
    except Exception:
        pass
    # In the boxes' own terms: position across (a0..a1), value along (v0..v1).
    items = []
    for b in boxes:
        a0, a1, v0, v1 = (b[0], b[1], b[2], b[3]) if vertical else (b[2], b[3], b[0], b[1])
        items.append({"a0": a0, "a1": a1, "q1": v0, "q3": v1, "median": None, "min": v0, "max": v1, "outliers": []})
    for line in lines:
        if len(line.get_xdata()) > budget.caps["total_points"]:
            continue
        xs, ys = _floats(line.get_xdata()), _floats(line.get_ydata())
        if xs is None or ys is None:
            continue
        across, along = (xs, ys) if vertical else (ys, xs)
        for it in items:
            mid = (it["a0"] + it["a1"]) / 2
            inside = all(it["a0"] - 1e-9 <= a <= it["a1"] + 1e-9 for a in across)
            if not inside:
                continue
            if line.get_linestyle() in ("None", "", " ", "none"):
                it["outliers"].extend(along)  # fliers: markers only
            elif len(along) == 2 and along[0] == along[1] and across[0] != across[1]:
                if it["q1"] - 1e-9 <= along[0] <= it["q3"] + 1e-9 and abs(across[0] - it["a0"]) < 1e-9 + abs(it["a1"] - it["a0"]) / 2 and \
                        abs(across[1] - it["a1"]) < 1e-9 + abs(it["a1"] - it["a0"]) / 2:
                    it["median"] = along[0]
            elif len(along) == 2 and across[0] == across[1] and abs(across[0] - mid) < 1e-9 + (it["a1"] - it["a0"]):
                lo, hi = min(along), max(along)
                if hi <= it["q1"] + 1e-9:
                    it["min"] = lo
                elif lo >= it["q3"] - 1e-9:
                    it["max"] = hi
            break
    cap = budget.caps["elements"]
    if len(items) > cap:
        budget.truncated = True
    for n, it in enumerate(items[:cap]):
        key = round((it["a0"] + it["a1"]) / 2, 6)
        label = ticks.get(key) or "Box %d" % (n + 1)
        outliers = it["outliers"]
        if len(outliers) > budget.caps["points"]:
            budget.truncated = True
            outliers = outliers[:budget.caps["points"]]
        c["elements"].append({"label": _text(label, budget), "min": it["min"], "first_quartile": it["q1"],
                              "median": it["median"] if it["median"] is not None else (it["q1"] + it["q3"]) / 2,
                              "third_quartile": it["q3"], "max": it["max"], "outliers": outliers})
    return c


def _kind(ax):
    names = set()
    for a in getattr(ax, "_children", None) or (list(ax.lines) + list(ax.collections) + list(ax.patches) + list(ax.images)):
        n = type(a).__name__
        if n in ("Text", "Annotation"):
            continue
        names.add(n)
    if not names:
        return "unknown"
    if any(type(b).__name__ == "BarContainer" for b in ax.containers) and names <= {"Rectangle", "Line2D", "LineCollection"}:
        return "bar"
    if names == {"Line2D"}:
        boxes, lines = _boxes(ax)
        return "box_and_whisker" if boxes and len(lines) >= 4 * len(boxes) else "line"
    if "PathPatch" in names and names <= {"PathPatch", "Line2D"}:
        return "box_and_whisker"
    if names == {"PathCollection"}:
        return "scatter"
    if names == {"Wedge"}:
        return "pie"
    return "unknown"


def _axes_chart(ax, budget):
    kind = _kind(ax)
    try:
        if kind in ("line", "scatter"):
            return _point_chart(ax, kind, budget)
        if kind == "bar":
            return _bar_chart(ax, budget)
        if kind == "pie":
            return _pie_chart(ax, budget)
        if kind == "box_and_whisker":
            return _box_chart(ax, budget)
    except Exception:
        pass
    return {"type": "unknown", "title": _text(ax.get_title(), budget), "elements": []}


def figure_chart(fig, caps):
    """The chart of fig (a dict for JSON), or None for a figure without axes."""
    budget = _Budget(caps)
    axes = [ax for ax in fig.get_axes() if ax.get_visible()]
    if not axes:
        return None
    if len(axes) == 1:
        chart = _axes_chart(axes[0], budget)
    else:
        sup = getattr(fig, "_suptitle", None)
        cap = caps["elements"]
        if len(axes) > cap:
            budget.truncated = True
        chart = {"type": "superchart", "title": _text(sup.get_text() if sup is not None else "", budget),
                 "elements": [_axes_chart(ax, budget) for ax in axes[:cap]]}
    if budget.truncated:
        chart["truncated"] = True
    return chart
