"""What changed between two bundles (``xtc-conformance diff OLD NEW``). No pytest.

Cases are matched by ``<target>-<case id>``. Found: cases whose status changed (a
*regression* where a passed case now fails, errs, is invalid or has no result), cases new
in NEW and gone from OLD, and kernels slower or faster beyond the noise of their repeats.

The speed test: a bundle keeps each kernel call's seconds (``times``, one per repeat, of
passed cases with a performance record). Two samples are compared with the Mann-Whitney
U test (two-sided, exact distribution without ties; rank-based, so one outlier repeat
does not decide), and a kernel counts as slower or faster when p < ``alpha`` (0.01) *and*
its median moved by more than ``threshold`` (10%). With 5 repeats on each side the exact
test reaches p = 2/252 = 0.008 only when every repeat of one side is above every repeat
of the other: the ranges do not overlap. Fewer than 4 repeats on a side: not tested
(counted as such). The exact distribution is a few lines of counting (below); scipy
would be a 40 MB dependency for it.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import cache
from math import comb, erfc, sqrt
from typing import Any

from pytest_xtc.report.parts.records import CaseRecord

ALPHA = 0.01
THRESHOLD = 0.10
MIN_SAMPLES = 4
#: A status change from passed to one of these is a regression.
WORSE = ("failed", "error", "invalid", "missing")
TEST = (f"Mann-Whitney U, two-sided, on each repeat's kernel time; p < {ALPHA} and the "
        f"median moved by more than {THRESHOLD:.0%}")


@cache
def _u_counts(n: int, m: int) -> tuple[int, ...]:
    """How many orderings of n + m distinct values give each U (0..n*m) to the first n."""
    if n == 0 or m == 0:
        return (1,)
    with_n = _u_counts(n - 1, m)  # the largest value belongs to the first sample: +m
    with_m = _u_counts(n, m - 1)
    counts = [0] * (n * m + 1)
    for u, c in enumerate(with_n):
        counts[u + m] += c
    for u, c in enumerate(with_m):
        counts[u] += c
    return tuple(counts)


def mann_whitney(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p-value of the Mann-Whitney U test of samples ``a`` and ``b``: exact for
    small samples (ties counted a half), the normal approximation beyond 20 a side."""
    n, m = len(a), len(b)
    u = sum((x > y) + 0.5 * (x == y) for x in a for y in b)
    tail = min(u, n * m - u)
    if n <= 20 and m <= 20:
        counts = _u_counts(n, m)
        below = sum(c for k, c in enumerate(counts) if k <= tail)
        return min(1.0, 2 * below / comb(n + m, n))
    mean, sd = n * m / 2, sqrt(n * m * (n + m + 1) / 12)
    return min(1.0, erfc((mean - tail - 0.5) / sd / sqrt(2)))


@dataclass(frozen=True)
class Change:
    case: str  # <target>-<case id>
    old: str
    new: str

    @property
    def regression(self) -> bool:
        return self.old == "passed" and self.new in WORSE


@dataclass(frozen=True)
class Speed:
    case: str
    old_median_s: float
    new_median_s: float
    ratio: float  # new median / old median
    p: float
    samples: tuple[int, int]


@dataclass
class Comparison:
    old: str
    new: str
    changed: list[Change] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)
    slower: list[Speed] = field(default_factory=list)
    faster: list[Speed] = field(default_factory=list)
    timed: int = 0  # cases timed in both with enough repeats
    untimed: int = 0  # cases in both without enough repeats on a side
    test: str = TEST

    @property
    def regressions(self) -> list[str]:
        return ([c.case for c in self.changed if c.regression]
                + [s.case for s in self.slower])

    @property
    def empty(self) -> bool:
        return not (self.changed or self.added or self.gone or self.slower or self.faster)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["regressions"] = self.regressions
        return data


def _times(record: CaseRecord) -> list[float]:
    if record.status != "passed" or not record.times:
        return []
    return [float(t) for t in record.times if isinstance(t, (int, float))]


def _speed(key: str, old: CaseRecord, new: CaseRecord, alpha: float,
           threshold: float) -> tuple[Speed | None, bool]:
    """The kernel's speed change, if beyond noise; and whether it could be tested."""
    a, b = _times(old), _times(new)
    if len(a) < MIN_SAMPLES or len(b) < MIN_SAMPLES:
        return None, False
    before, after = statistics.median(a), statistics.median(b)
    if before <= 0:
        return None, False
    ratio, p = after / before, mann_whitney(a, b)
    if p < alpha and abs(ratio - 1) > threshold:
        return Speed(key, before, after, ratio, p, (len(a), len(b))), True
    return None, True


def by_key(records: Sequence[CaseRecord]) -> dict[str, CaseRecord]:
    return {r.key: r for r in records}


def compare(old: Sequence[CaseRecord], new: Sequence[CaseRecord], *, old_name: str = "OLD",
            new_name: str = "NEW", alpha: float = ALPHA,
            threshold: float = THRESHOLD) -> Comparison:
    """The differences between the records of two bundles."""
    before, after = by_key(old), by_key(new)
    found = Comparison(old_name, new_name, test=TEST if (alpha, threshold) == (ALPHA, THRESHOLD)
                       else f"Mann-Whitney U, two-sided; p < {alpha}, median moved > "
                       f"{threshold:.0%}")
    found.added = sorted(k for k in after if k not in before)
    found.gone = sorted(k for k in before if k not in after)
    for key in sorted(before.keys() & after.keys()):
        was, now = before[key], after[key]
        if was.status != now.status:
            found.changed.append(Change(key, was.status, now.status))
            continue
        speed, tested = _speed(key, was, now, alpha, threshold)
        found.timed += tested
        found.untimed += not tested and bool(_times(was) or _times(now))
        if speed is not None:
            (found.slower if speed.ratio > 1 else found.faster).append(speed)
    found.slower.sort(key=lambda s: -s.ratio)
    found.faster.sort(key=lambda s: s.ratio)
    return found


def summarize(found: Comparison) -> Mapping[str, int]:
    return {"changed": len(found.changed), "regressions": len(found.regressions),
            "added": len(found.added), "gone": len(found.gone),
            "slower": len(found.slower), "faster": len(found.faster)}
