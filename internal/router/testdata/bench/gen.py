# Writes agent_1000.py, the routing benchmark's input: an analysis script of the shape agents
# write (stdlib imports, an optional numpy, dataclasses, parsing, aggregation, f-strings), exactly
# 1,000 lines. Run: python3 gen.py
import random

random.seed(7)
HEAD = '''"""Sales report: load the exports, clean them, aggregate by region and month, and print a
summary with a few checks. Written in one go, as an agent would."""
from __future__ import annotations

import csv
import io
import json
import math
import re
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Iterable, Optional

try:
    import numpy as np
except ImportError:  # the report works without it, only slower
    np = None

DATE_RE = re.compile(r"(\\d{4})-(\\d{2})-(\\d{2})")
'''

SECTION = '''

@dataclass
class Record{i}:
    """One row of the {name} export."""
    day: date
    region: str
    units: int
    price: float
    tags: list[str] = field(default_factory=list)

    @property
    def revenue(self) -> float:
        return round(self.units * self.price, 2)


def parse_{name}(text: str) -> list[Record{i}]:
    rows = []
    for line_no, row in enumerate(csv.DictReader(io.StringIO(text)), start=2):
        m = DATE_RE.match(row.get("day", ""))
        if not m:
            print(f"line {{line_no}}: bad date {{row.get('day')!r}}")
            continue
        try:
            units = int(row["units"])
            price = float(row["price"].replace(",", "."))
        except (KeyError, ValueError) as exc:
            print(f"line {{line_no}}: skipped ({{exc}})")
            continue
        day = date(int(m[1]), int(m[2]), int(m[3]))
        tags = [t.strip().lower() for t in row.get("tags", "").split(";") if t.strip()]
        rows.append(Record{i}(day, row.get("region", "{name}"), units, price, tags))
    return rows


def summarise_{name}(records: Iterable[Record{i}], window: int = {w}) -> dict:
    by_month: dict[str, list[float]] = defaultdict(list)
    tag_counts = Counter()
    for r in records:
        by_month[r.day.strftime("%Y-%m")].append(r.revenue)
        tag_counts.update(r.tags)
    months = sorted(by_month)
    totals = [sum(by_month[m]) for m in months]
    moving = [
        statistics.fmean(totals[max(0, k - window + 1) : k + 1]) for k in range(len(totals))
    ]
    spread = statistics.pstdev(totals) if len(totals) > 1 else 0.0
    return {{
        "months": months,
        "totals": totals,
        "moving": [round(x, 2) for x in moving],
        "spread": round(spread, 3),
        "top_tags": tag_counts.most_common({k}),
        "growth": (totals[-1] / totals[0] - 1) if totals and totals[0] else math.nan,
    }}
'''

TAIL = '''

def check(summary: dict) -> list[str]:
    problems = []
    if summary["spread"] > 1e6:
        problems.append("spread is implausible")
    if any(t < 0 for t in summary["totals"]):
        problems.append("negative month")
    return problems


if __name__ == "__main__":
    sample = "day,region,units,price,tags\\n2024-01-03,north,3,9.99,new;promo\\n"
    recs = parse_region0(sample)
    summary = summarise_region0(recs)
    print(json.dumps(summary, indent=2, default=str))
    print(check(summary) or "ok")
'''

LINES = 1000
body, i = HEAD, 0
while True:
    s = SECTION.format(i=i, name=f"region{i}", w=random.randint(3, 9), k=random.randint(2, 5))
    if (body + s + TAIL).count("\n") > LINES:
        break
    body, i = body + s, i + 1
body += TAIL
missing = LINES - body.count("\n")
body += "".join(f"# padding {n}\n" for n in range(missing))
assert body.count("\n") == LINES
compile(body, "agent_1000.py", "exec")
with open("agent_1000.py", "w") as f:
    f.write(body)
