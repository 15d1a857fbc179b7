"""Sales report: load the exports, clean them, aggregate by region and month, and print a
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

DATE_RE = re.compile(r"(\d{4})-(\d{2})-(\d{2})")


@dataclass
class Record0:
    """One row of the region0 export."""
    day: date
    region: str
    units: int
    price: float
    tags: list[str] = field(default_factory=list)

    @property
    def revenue(self) -> float:
        return round(self.units * self.price, 2)


def parse_region0(text: str) -> list[Record0]:
    rows = []
    for line_no, row in enumerate(csv.DictReader(io.StringIO(text)), start=2):
        m = DATE_RE.match(row.get("day", ""))
        if not m:
            print(f"line {line_no}: bad date {row.get('day')!r}")
            continue
        try:
            units = int(row["units"])
            price = float(row["price"].replace(",", "."))
        except (KeyError, ValueError) as exc:
            print(f"line {line_no}: skipped ({exc})")
            continue
        day = date(int(m[1]), int(m[2]), int(m[3]))
        tags = [t.strip().lower() for t in row.get("tags", "").split(";") if t.strip()]
        rows.append(Record0(day, row.get("region", "region0"), units, price, tags))
    return rows


def summarise_region0(records: Iterable[Record0], window: int = 5) -> dict:
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
    return {
        "months": months,
        "totals": totals,
        "moving": [round(x, 2) for x in moving],
        "spread": round(spread, 3),
        "top_tags": tag_counts.most_common(3),
        "growth": (totals[-1] / totals[0] - 1) if totals and totals[0] else math.nan,
    }


@dataclass
class Record1:
    """One row of the region1 export."""
    day: date
    region: str
    units: int
    price: float
    tags: list[str] = field(default_factory=list)

    @property
    def revenue(self) -> float:
        return round(self.units * self.price, 2)


def parse_region1(text: str) -> list[Record1]:
    rows = []
    for line_no, row in enumerate(csv.DictReader(io.StringIO(text)), start=2):
        m = DATE_RE.match(row.get("day", ""))
        if not m:
            print(f"line {line_no}: bad date {row.get('day')!r}")
            continue
        try:
            units = int(row["units"])
            price = float(row["price"].replace(",", "."))
        except (KeyError, ValueError) as exc:
            print(f"line {line_no}: skipped ({exc})")
            continue
        day = date(int(m[1]), int(m[2]), int(m[3]))
        tags = [t.strip().lower() for t in row.get("tags", "").split(";") if t.strip()]
        rows.append(Record1(day, row.get("region", "region1"), units, price, tags))
    return rows


def summarise_region1(records: Iterable[Record1], window: int = 6) -> dict:
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
    return {
        "months": months,
        "totals": totals,
        "moving": [round(x, 2) for x in moving],
        "spread": round(spread, 3),
        "top_tags": tag_counts.most_common(2),
        "growth": (totals[-1] / totals[0] - 1) if totals and totals[0] else math.nan,
    }


@dataclass
class Record2:
    """One row of the region2 export."""
    day: date
    region: str
    units: int
    price: float
    tags: list[str] = field(default_factory=list)

    @property
    def revenue(self) -> float:
        return round(self.units * self.price, 2)


def parse_region2(text: str) -> list[Record2]:
    rows = []
    for line_no, row in enumerate(csv.DictReader(io.StringIO(text)), start=2):
        m = DATE_RE.match(row.get("day", ""))
        if not m:
            print(f"line {line_no}: bad date {row.get('day')!r}")
            continue
        try:
            units = int(row["units"])
            price = float(row["price"].replace(",", "."))
        except (KeyError, ValueError) as exc:
            print(f"line {line_no}: skipped ({exc})")
            continue
        day = date(int(m[1]), int(m[2]), int(m[3]))
        tags = [t.strip().lower() for t in row.get("tags", "").split(";") if t.strip()]
        rows.append(Record2(day, row.get("region", "region2"), units, price, tags))
    return rows


def summarise_region2(records: Iterable[Record2], window: int = 3) -> dict:
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
    return {
        "months": months,
        "totals": totals,
        "moving": [round(x, 2) for x in moving],
        "spread": round(spread, 3),
        "top_tags": tag_counts.most_common(2),
        "growth": (totals[-1] / totals[0] - 1) if totals and totals[0] else math.nan,
    }


@dataclass
class Record3:
    """One row of the region3 export."""
    day: date
    region: str
    units: int
    price: float
    tags: list[str] = field(default_factory=list)

    @property
    def revenue(self) -> float:
        return round(self.units * self.price, 2)


def parse_region3(text: str) -> list[Record3]:
    rows = []
    for line_no, row in enumerate(csv.DictReader(io.StringIO(text)), start=2):
        m = DATE_RE.match(row.get("day", ""))
        if not m:
            print(f"line {line_no}: bad date {row.get('day')!r}")
            continue
        try:
            units = int(row["units"])
            price = float(row["price"].replace(",", "."))
        except (KeyError, ValueError) as exc:
            print(f"line {line_no}: skipped ({exc})")
            continue
        day = date(int(m[1]), int(m[2]), int(m[3]))
        tags = [t.strip().lower() for t in row.get("tags", "").split(";") if t.strip()]
        rows.append(Record3(day, row.get("region", "region3"), units, price, tags))
    return rows


def summarise_region3(records: Iterable[Record3], window: int = 5) -> dict:
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
    return {
        "months": months,
        "totals": totals,
        "moving": [round(x, 2) for x in moving],
        "spread": round(spread, 3),
        "top_tags": tag_counts.most_common(2),
        "growth": (totals[-1] / totals[0] - 1) if totals and totals[0] else math.nan,
    }


@dataclass
class Record4:
    """One row of the region4 export."""
    day: date
    region: str
    units: int
    price: float
    tags: list[str] = field(default_factory=list)

    @property
    def revenue(self) -> float:
        return round(self.units * self.price, 2)


def parse_region4(text: str) -> list[Record4]:
    rows = []
    for line_no, row in enumerate(csv.DictReader(io.StringIO(text)), start=2):
        m = DATE_RE.match(row.get("day", ""))
        if not m:
            print(f"line {line_no}: bad date {row.get('day')!r}")
            continue
        try:
            units = int(row["units"])
            price = float(row["price"].replace(",", "."))
        except (KeyError, ValueError) as exc:
            print(f"line {line_no}: skipped ({exc})")
            continue
        day = date(int(m[1]), int(m[2]), int(m[3]))
        tags = [t.strip().lower() for t in row.get("tags", "").split(";") if t.strip()]
        rows.append(Record4(day, row.get("region", "region4"), units, price, tags))
    return rows


def summarise_region4(records: Iterable[Record4], window: int = 7) -> dict:
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
    return {
        "months": months,
        "totals": totals,
        "moving": [round(x, 2) for x in moving],
        "spread": round(spread, 3),
        "top_tags": tag_counts.most_common(3),
        "growth": (totals[-1] / totals[0] - 1) if totals and totals[0] else math.nan,
    }


@dataclass
class Record5:
    """One row of the region5 export."""
    day: date
    region: str
    units: int
    price: float
    tags: list[str] = field(default_factory=list)

    @property
    def revenue(self) -> float:
        return round(self.units * self.price, 2)


def parse_region5(text: str) -> list[Record5]:
    rows = []
    for line_no, row in enumerate(csv.DictReader(io.StringIO(text)), start=2):
        m = DATE_RE.match(row.get("day", ""))
        if not m:
            print(f"line {line_no}: bad date {row.get('day')!r}")
            continue
        try:
            units = int(row["units"])
            price = float(row["price"].replace(",", "."))
        except (KeyError, ValueError) as exc:
            print(f"line {line_no}: skipped ({exc})")
            continue
        day = date(int(m[1]), int(m[2]), int(m[3]))
        tags = [t.strip().lower() for t in row.get("tags", "").split(";") if t.strip()]
        rows.append(Record5(day, row.get("region", "region5"), units, price, tags))
    return rows


def summarise_region5(records: Iterable[Record5], window: int = 3) -> dict:
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
    return {
        "months": months,
        "totals": totals,
        "moving": [round(x, 2) for x in moving],
        "spread": round(spread, 3),
        "top_tags": tag_counts.most_common(2),
        "growth": (totals[-1] / totals[0] - 1) if totals and totals[0] else math.nan,
    }


@dataclass
class Record6:
    """One row of the region6 export."""
    day: date
    region: str
    units: int
    price: float
    tags: list[str] = field(default_factory=list)

    @property
    def revenue(self) -> float:
        return round(self.units * self.price, 2)


def parse_region6(text: str) -> list[Record6]:
    rows = []
    for line_no, row in enumerate(csv.DictReader(io.StringIO(text)), start=2):
        m = DATE_RE.match(row.get("day", ""))
        if not m:
            print(f"line {line_no}: bad date {row.get('day')!r}")
            continue
        try:
            units = int(row["units"])
            price = float(row["price"].replace(",", "."))
        except (KeyError, ValueError) as exc:
            print(f"line {line_no}: skipped ({exc})")
            continue
        day = date(int(m[1]), int(m[2]), int(m[3]))
        tags = [t.strip().lower() for t in row.get("tags", "").split(";") if t.strip()]
        rows.append(Record6(day, row.get("region", "region6"), units, price, tags))
    return rows


def summarise_region6(records: Iterable[Record6], window: int = 6) -> dict:
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
    return {
        "months": months,
        "totals": totals,
        "moving": [round(x, 2) for x in moving],
        "spread": round(spread, 3),
        "top_tags": tag_counts.most_common(5),
        "growth": (totals[-1] / totals[0] - 1) if totals and totals[0] else math.nan,
    }


@dataclass
class Record7:
    """One row of the region7 export."""
    day: date
    region: str
    units: int
    price: float
    tags: list[str] = field(default_factory=list)

    @property
    def revenue(self) -> float:
        return round(self.units * self.price, 2)


def parse_region7(text: str) -> list[Record7]:
    rows = []
    for line_no, row in enumerate(csv.DictReader(io.StringIO(text)), start=2):
        m = DATE_RE.match(row.get("day", ""))
        if not m:
            print(f"line {line_no}: bad date {row.get('day')!r}")
            continue
        try:
            units = int(row["units"])
            price = float(row["price"].replace(",", "."))
        except (KeyError, ValueError) as exc:
            print(f"line {line_no}: skipped ({exc})")
            continue
        day = date(int(m[1]), int(m[2]), int(m[3]))
        tags = [t.strip().lower() for t in row.get("tags", "").split(";") if t.strip()]
        rows.append(Record7(day, row.get("region", "region7"), units, price, tags))
    return rows


def summarise_region7(records: Iterable[Record7], window: int = 3) -> dict:
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
    return {
        "months": months,
        "totals": totals,
        "moving": [round(x, 2) for x in moving],
        "spread": round(spread, 3),
        "top_tags": tag_counts.most_common(3),
        "growth": (totals[-1] / totals[0] - 1) if totals and totals[0] else math.nan,
    }


@dataclass
class Record8:
    """One row of the region8 export."""
    day: date
    region: str
    units: int
    price: float
    tags: list[str] = field(default_factory=list)

    @property
    def revenue(self) -> float:
        return round(self.units * self.price, 2)


def parse_region8(text: str) -> list[Record8]:
    rows = []
    for line_no, row in enumerate(csv.DictReader(io.StringIO(text)), start=2):
        m = DATE_RE.match(row.get("day", ""))
        if not m:
            print(f"line {line_no}: bad date {row.get('day')!r}")
            continue
        try:
            units = int(row["units"])
            price = float(row["price"].replace(",", "."))
        except (KeyError, ValueError) as exc:
            print(f"line {line_no}: skipped ({exc})")
            continue
        day = date(int(m[1]), int(m[2]), int(m[3]))
        tags = [t.strip().lower() for t in row.get("tags", "").split(";") if t.strip()]
        rows.append(Record8(day, row.get("region", "region8"), units, price, tags))
    return rows


def summarise_region8(records: Iterable[Record8], window: int = 3) -> dict:
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
    return {
        "months": months,
        "totals": totals,
        "moving": [round(x, 2) for x in moving],
        "spread": round(spread, 3),
        "top_tags": tag_counts.most_common(5),
        "growth": (totals[-1] / totals[0] - 1) if totals and totals[0] else math.nan,
    }


@dataclass
class Record9:
    """One row of the region9 export."""
    day: date
    region: str
    units: int
    price: float
    tags: list[str] = field(default_factory=list)

    @property
    def revenue(self) -> float:
        return round(self.units * self.price, 2)


def parse_region9(text: str) -> list[Record9]:
    rows = []
    for line_no, row in enumerate(csv.DictReader(io.StringIO(text)), start=2):
        m = DATE_RE.match(row.get("day", ""))
        if not m:
            print(f"line {line_no}: bad date {row.get('day')!r}")
            continue
        try:
            units = int(row["units"])
            price = float(row["price"].replace(",", "."))
        except (KeyError, ValueError) as exc:
            print(f"line {line_no}: skipped ({exc})")
            continue
        day = date(int(m[1]), int(m[2]), int(m[3]))
        tags = [t.strip().lower() for t in row.get("tags", "").split(";") if t.strip()]
        rows.append(Record9(day, row.get("region", "region9"), units, price, tags))
    return rows


def summarise_region9(records: Iterable[Record9], window: int = 3) -> dict:
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
    return {
        "months": months,
        "totals": totals,
        "moving": [round(x, 2) for x in moving],
        "spread": round(spread, 3),
        "top_tags": tag_counts.most_common(2),
        "growth": (totals[-1] / totals[0] - 1) if totals and totals[0] else math.nan,
    }


@dataclass
class Record10:
    """One row of the region10 export."""
    day: date
    region: str
    units: int
    price: float
    tags: list[str] = field(default_factory=list)

    @property
    def revenue(self) -> float:
        return round(self.units * self.price, 2)


def parse_region10(text: str) -> list[Record10]:
    rows = []
    for line_no, row in enumerate(csv.DictReader(io.StringIO(text)), start=2):
        m = DATE_RE.match(row.get("day", ""))
        if not m:
            print(f"line {line_no}: bad date {row.get('day')!r}")
            continue
        try:
            units = int(row["units"])
            price = float(row["price"].replace(",", "."))
        except (KeyError, ValueError) as exc:
            print(f"line {line_no}: skipped ({exc})")
            continue
        day = date(int(m[1]), int(m[2]), int(m[3]))
        tags = [t.strip().lower() for t in row.get("tags", "").split(";") if t.strip()]
        rows.append(Record10(day, row.get("region", "region10"), units, price, tags))
    return rows


def summarise_region10(records: Iterable[Record10], window: int = 4) -> dict:
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
    return {
        "months": months,
        "totals": totals,
        "moving": [round(x, 2) for x in moving],
        "spread": round(spread, 3),
        "top_tags": tag_counts.most_common(2),
        "growth": (totals[-1] / totals[0] - 1) if totals and totals[0] else math.nan,
    }


@dataclass
class Record11:
    """One row of the region11 export."""
    day: date
    region: str
    units: int
    price: float
    tags: list[str] = field(default_factory=list)

    @property
    def revenue(self) -> float:
        return round(self.units * self.price, 2)


def parse_region11(text: str) -> list[Record11]:
    rows = []
    for line_no, row in enumerate(csv.DictReader(io.StringIO(text)), start=2):
        m = DATE_RE.match(row.get("day", ""))
        if not m:
            print(f"line {line_no}: bad date {row.get('day')!r}")
            continue
        try:
            units = int(row["units"])
            price = float(row["price"].replace(",", "."))
        except (KeyError, ValueError) as exc:
            print(f"line {line_no}: skipped ({exc})")
            continue
        day = date(int(m[1]), int(m[2]), int(m[3]))
        tags = [t.strip().lower() for t in row.get("tags", "").split(";") if t.strip()]
        rows.append(Record11(day, row.get("region", "region11"), units, price, tags))
    return rows


def summarise_region11(records: Iterable[Record11], window: int = 7) -> dict:
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
    return {
        "months": months,
        "totals": totals,
        "moving": [round(x, 2) for x in moving],
        "spread": round(spread, 3),
        "top_tags": tag_counts.most_common(5),
        "growth": (totals[-1] / totals[0] - 1) if totals and totals[0] else math.nan,
    }


@dataclass
class Record12:
    """One row of the region12 export."""
    day: date
    region: str
    units: int
    price: float
    tags: list[str] = field(default_factory=list)

    @property
    def revenue(self) -> float:
        return round(self.units * self.price, 2)


def parse_region12(text: str) -> list[Record12]:
    rows = []
    for line_no, row in enumerate(csv.DictReader(io.StringIO(text)), start=2):
        m = DATE_RE.match(row.get("day", ""))
        if not m:
            print(f"line {line_no}: bad date {row.get('day')!r}")
            continue
        try:
            units = int(row["units"])
            price = float(row["price"].replace(",", "."))
        except (KeyError, ValueError) as exc:
            print(f"line {line_no}: skipped ({exc})")
            continue
        day = date(int(m[1]), int(m[2]), int(m[3]))
        tags = [t.strip().lower() for t in row.get("tags", "").split(";") if t.strip()]
        rows.append(Record12(day, row.get("region", "region12"), units, price, tags))
    return rows


def summarise_region12(records: Iterable[Record12], window: int = 3) -> dict:
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
    return {
        "months": months,
        "totals": totals,
        "moving": [round(x, 2) for x in moving],
        "spread": round(spread, 3),
        "top_tags": tag_counts.most_common(3),
        "growth": (totals[-1] / totals[0] - 1) if totals and totals[0] else math.nan,
    }


@dataclass
class Record13:
    """One row of the region13 export."""
    day: date
    region: str
    units: int
    price: float
    tags: list[str] = field(default_factory=list)

    @property
    def revenue(self) -> float:
        return round(self.units * self.price, 2)


def parse_region13(text: str) -> list[Record13]:
    rows = []
    for line_no, row in enumerate(csv.DictReader(io.StringIO(text)), start=2):
        m = DATE_RE.match(row.get("day", ""))
        if not m:
            print(f"line {line_no}: bad date {row.get('day')!r}")
            continue
        try:
            units = int(row["units"])
            price = float(row["price"].replace(",", "."))
        except (KeyError, ValueError) as exc:
            print(f"line {line_no}: skipped ({exc})")
            continue
        day = date(int(m[1]), int(m[2]), int(m[3]))
        tags = [t.strip().lower() for t in row.get("tags", "").split(";") if t.strip()]
        rows.append(Record13(day, row.get("region", "region13"), units, price, tags))
    return rows


def summarise_region13(records: Iterable[Record13], window: int = 3) -> dict:
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
    return {
        "months": months,
        "totals": totals,
        "moving": [round(x, 2) for x in moving],
        "spread": round(spread, 3),
        "top_tags": tag_counts.most_common(3),
        "growth": (totals[-1] / totals[0] - 1) if totals and totals[0] else math.nan,
    }


@dataclass
class Record14:
    """One row of the region14 export."""
    day: date
    region: str
    units: int
    price: float
    tags: list[str] = field(default_factory=list)

    @property
    def revenue(self) -> float:
        return round(self.units * self.price, 2)


def parse_region14(text: str) -> list[Record14]:
    rows = []
    for line_no, row in enumerate(csv.DictReader(io.StringIO(text)), start=2):
        m = DATE_RE.match(row.get("day", ""))
        if not m:
            print(f"line {line_no}: bad date {row.get('day')!r}")
            continue
        try:
            units = int(row["units"])
            price = float(row["price"].replace(",", "."))
        except (KeyError, ValueError) as exc:
            print(f"line {line_no}: skipped ({exc})")
            continue
        day = date(int(m[1]), int(m[2]), int(m[3]))
        tags = [t.strip().lower() for t in row.get("tags", "").split(";") if t.strip()]
        rows.append(Record14(day, row.get("region", "region14"), units, price, tags))
    return rows


def summarise_region14(records: Iterable[Record14], window: int = 5) -> dict:
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
    return {
        "months": months,
        "totals": totals,
        "moving": [round(x, 2) for x in moving],
        "spread": round(spread, 3),
        "top_tags": tag_counts.most_common(5),
        "growth": (totals[-1] / totals[0] - 1) if totals and totals[0] else math.nan,
    }


@dataclass
class Record15:
    """One row of the region15 export."""
    day: date
    region: str
    units: int
    price: float
    tags: list[str] = field(default_factory=list)

    @property
    def revenue(self) -> float:
        return round(self.units * self.price, 2)


def parse_region15(text: str) -> list[Record15]:
    rows = []
    for line_no, row in enumerate(csv.DictReader(io.StringIO(text)), start=2):
        m = DATE_RE.match(row.get("day", ""))
        if not m:
            print(f"line {line_no}: bad date {row.get('day')!r}")
            continue
        try:
            units = int(row["units"])
            price = float(row["price"].replace(",", "."))
        except (KeyError, ValueError) as exc:
            print(f"line {line_no}: skipped ({exc})")
            continue
        day = date(int(m[1]), int(m[2]), int(m[3]))
        tags = [t.strip().lower() for t in row.get("tags", "").split(";") if t.strip()]
        rows.append(Record15(day, row.get("region", "region15"), units, price, tags))
    return rows


def summarise_region15(records: Iterable[Record15], window: int = 4) -> dict:
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
    return {
        "months": months,
        "totals": totals,
        "moving": [round(x, 2) for x in moving],
        "spread": round(spread, 3),
        "top_tags": tag_counts.most_common(2),
        "growth": (totals[-1] / totals[0] - 1) if totals and totals[0] else math.nan,
    }


@dataclass
class Record16:
    """One row of the region16 export."""
    day: date
    region: str
    units: int
    price: float
    tags: list[str] = field(default_factory=list)

    @property
    def revenue(self) -> float:
        return round(self.units * self.price, 2)


def parse_region16(text: str) -> list[Record16]:
    rows = []
    for line_no, row in enumerate(csv.DictReader(io.StringIO(text)), start=2):
        m = DATE_RE.match(row.get("day", ""))
        if not m:
            print(f"line {line_no}: bad date {row.get('day')!r}")
            continue
        try:
            units = int(row["units"])
            price = float(row["price"].replace(",", "."))
        except (KeyError, ValueError) as exc:
            print(f"line {line_no}: skipped ({exc})")
            continue
        day = date(int(m[1]), int(m[2]), int(m[3]))
        tags = [t.strip().lower() for t in row.get("tags", "").split(";") if t.strip()]
        rows.append(Record16(day, row.get("region", "region16"), units, price, tags))
    return rows


def summarise_region16(records: Iterable[Record16], window: int = 7) -> dict:
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
    return {
        "months": months,
        "totals": totals,
        "moving": [round(x, 2) for x in moving],
        "spread": round(spread, 3),
        "top_tags": tag_counts.most_common(4),
        "growth": (totals[-1] / totals[0] - 1) if totals and totals[0] else math.nan,
    }


def check(summary: dict) -> list[str]:
    problems = []
    if summary["spread"] > 1e6:
        problems.append("spread is implausible")
    if any(t < 0 for t in summary["totals"]):
        problems.append("negative month")
    return problems


if __name__ == "__main__":
    sample = "day,region,units,price,tags\n2024-01-03,north,3,9.99,new;promo\n"
    recs = parse_region0(sample)
    summary = summarise_region0(recs)
    print(json.dumps(summary, indent=2, default=str))
    print(check(summary) or "ok")
# padding 0
# padding 1
# padding 2
# padding 3
# padding 4
# padding 5
# padding 6
# padding 7
# padding 8
# padding 9
# padding 10
# padding 11
# padding 12
# padding 13
# padding 14
# padding 15
# padding 16
# padding 17
# padding 18
# padding 19
# padding 20
# padding 21
# padding 22
# padding 23
# padding 24
# padding 25
# padding 26
