"""What changed between two bundles (``xtc-conformance diff OLD NEW``). No pytest.

Cases are matched by ``<target>-<case id>``. Found: cases whose status changed (a
*regression* where a passed case now fails, errs, is invalid or has no result), cases new
in NEW and gone from OLD, and kernels slower or faster, *significantly and by more than
the noise* (docs/report.md, "Comparing two bundles", says why this method):

* each bundle keeps every repeat's kernel time (``times``) and numpy's median time for the
  same graph, measured by the same process moments later (``perf.numpy_median_s``): numpy
  runs the same code in both bundles, so the median of its ratios NEW/OLD over the pair's
  kernels is the change of the machine (load, clock, another host), and every kernel's
  ratio is divided by it;
* *significant*: the Mann-Whitney U test of the two samples (two-sided, exact) gives
  p < ``alpha`` (0.01; with 5 repeats a side, only when the ranges do not overlap);
* *large*: the bootstrap interval (99%, 2000 resamples of each side's repeats, seeded by
  the case) of the ratio of medians lies wholly beyond the kernel's minimum effect, the
  largest of ``threshold`` (10%), its group's noise, its own spread and its moment's:
  - the group's noise: how far the pair's other kernels of its group moved: their log
    ratios' scaled median absolute deviation times the normal quantile that N kernels
    exceed with probability ``alpha`` in all (Bonferroni: about 4 for 170). Groups:
    kernels on one thread, and *threaded* ones (scheduled with :data:`THREADED`), whose
    time depends on how many cores were free at that moment, which numpy's one thread
    does not see (on 2 cores with ``-n 2`` they move 13x to 800x between two runs);
  - its own spread: how far its repeats lie apart in either bundle (largest over
    smallest): a change within what one run already shows is not told from noise;
  - its moment's: how far numpy's time for this graph moved beyond the machine's change
    (a moment of load the pair's median does not show);

  repeats are consecutive calls in one process: they show a run's noise, not how far two
  runs lie apart, which these terms bound;
* kernels under :data:`MIN_KERNEL_S` on both sides are not compared (a call's overhead,
  the caches' state and the timer decide their times: counted as too short); fewer than
  4 repeats on a side: not tested.
"""

from __future__ import annotations

import hashlib
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import cache
from math import comb, erfc, sqrt
from typing import Any

import numpy as np

from pytest_xtc.report.parts.records import CaseRecord

ALPHA = 0.01
THRESHOLD = 0.10
MIN_SAMPLES = 4
#: Kernels faster than this (median, both sides) are not compared: their times are the
#: call's overhead and the timer's resolution more than the kernel.
MIN_KERNEL_S = 1e-5
#: The schedule primitive that spreads a kernel over threads (XTC's ``parallelize``).
THREADED = "parallelize"
CONFIDENCE = 0.99
RESAMPLES = 2000
#: Kernels a pair needs for its own noise figure (fewer: the threshold alone).
NOISE_KERNELS = 8
#: A status change from passed to one of these is a regression.
WORSE = ("failed", "error", "invalid", "missing")
TEST = (f"Mann-Whitney U p < {ALPHA} on each repeat's kernel time (over the machine's "
        f"change, numpy's median ratio) and the {CONFIDENCE:.0%} bootstrap interval of the "
        f"ratio of medians beyond the largest of {THRESHOLD:.0%}, the noise of the pair's "
        f"kernels of its group (one thread, threaded), its repeats' spread and numpy's "
        f"change at its moment")


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
    ratio: float  # new median / old median, over the machine's change (load)
    p: float  # Mann-Whitney U, two-sided
    samples: tuple[int, int]
    low: float = 0.0  # the bootstrap interval of ``ratio``
    high: float = 0.0
    load: float = 1.0  # the machine's change taken out (numpy's, the pair's median)
    effect: float = THRESHOLD  # the minimum effect it was held against
    moment: float = 0.0  # numpy's ratio NEW/OLD for this graph (0: not measured)
    threaded: bool = False
    spread: float = 0.0  # the wider spread of its repeats (largest / smallest - 1)


@dataclass
class Comparison:
    old: str
    new: str
    changed: list[Change] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)
    slower: list[Speed] = field(default_factory=list)
    faster: list[Speed] = field(default_factory=list)
    timed: int = 0  # kernels compared (enough repeats on both sides, long enough)
    untimed: int = 0  # cases in both without enough repeats on a side
    short: int = 0  # kernels under MIN_KERNEL_S on both sides: not compared
    machine: float = 1.0  # how much slower NEW's machine ran (numpy's median ratio)
    noise: float = 0.0  # the pair's own noise (relative), see the module's docstring
    effect: float = THRESHOLD  # the minimum effect: max(threshold, noise)
    threaded_noise: float = 0.0  # the same for the threaded kernels
    threaded_effect: float = THRESHOLD
    test: str = TEST

    @property
    def regressions(self) -> list[str]:
        return ([c.case for c in self.changed if c.regression]
                + [s.case for s in self.slower])

    @property
    def empty(self) -> bool:
        return not (self.changed or self.added or self.gone or self.slower or self.faster)

    def summary(self) -> dict[str, int]:
        """The counts every view shows (terminal, JSON, page): one set of numbers."""
        return {"changed": len(self.changed), "regressions": len(self.regressions),
                "added": len(self.added), "gone": len(self.gone), "slower": len(self.slower),
                "faster": len(self.faster), "timed": self.timed, "too_short": self.short,
                "untimed": self.untimed}

    def headline(self) -> str:
        """One sentence of :meth:`summary`, the same in the terminal and on the page."""
        n = self.summary()
        return (f"{n['regressions']} regressions ({n['changed']} status changes, "
                f"{n['slower']} kernels slower), {n['faster']} faster, {n['added']} new, "
                f"{n['gone']} gone; {n['timed']} kernels compared (the machine {self.machine:.2f}x "
                f"slower by numpy's times), {n['too_short']} too "
                f"short to compare (under {MIN_KERNEL_S * 1e6:g} us), {n['untimed']} with "
                f"too few repeats; minimum effect {self.effect:.0%} (noise of this pair "
                f"{self.noise:.0%}), threaded kernels {self.threaded_effect:.0%}, or a "
                f"kernel's own spread")

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["regressions"] = self.regressions
        data["summary"] = self.summary()
        return data


def _times(record: CaseRecord) -> list[float]:
    if record.status != "passed" or not record.times:
        return []
    return [float(t) for t in record.times if isinstance(t, (int, float))]


def _numpy_median(record: CaseRecord) -> float | None:
    value = (record.perf or {}).get("numpy_median_s")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        return None
    return float(value)


def _seed(key: str) -> int:
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little")


def bootstrap(a: Sequence[float], b: Sequence[float], key: str,
              confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The ``confidence`` interval of median(b) / median(a), each side's repeats
    resampled :data:`RESAMPLES` times (seeded by ``key``: the same bundles give the same
    interval)."""
    rng = np.random.default_rng(_seed(key))
    old, new = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    olds = np.median(rng.choice(old, (RESAMPLES, old.size)), axis=1)
    news = np.median(rng.choice(new, (RESAMPLES, new.size)), axis=1)
    ratios = news / olds
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(ratios, [tail, 100 - tail])
    return float(low), float(high)


def _candidate(key: str, old: CaseRecord, new: CaseRecord) -> Speed | str:
    """The kernel's change before the machine's is taken out (``moment``: numpy's ratio
    for this graph), or why none: ``untimed`` or ``short``."""
    a, b = _times(old), _times(new)
    if len(a) < MIN_SAMPLES or len(b) < MIN_SAMPLES:
        return "untimed"
    before, after = statistics.median(a), statistics.median(b)
    if before <= 0 or after <= 0:
        return "untimed"
    if before < MIN_KERNEL_S and after < MIN_KERNEL_S:
        return "short"
    ours, theirs = _numpy_median(old), _numpy_median(new)
    return Speed(key, before, after, after / before, 1.0, (len(a), len(b)),
                 moment=theirs / ours if ours and theirs else 0.0,
                 threaded=THREADED in _primitives(old) | _primitives(new),
                 spread=max((max(t) / min(t) - 1 for t in (a, b) if min(t) > 0), default=0.0))


def _primitives(record: CaseRecord) -> set[str]:
    found = (record.traits or {}).get("primitives")
    return {str(p) for p in found} if isinstance(found, (list, tuple)) else set()


def own_noise(speed: Speed) -> float:
    """The kernel's own noise (relative), once judged: the wider spread of its repeats in
    either bundle, or how far numpy's time at its moment moved beyond the machine's
    change (``load``)."""
    moved = (math.exp(abs(math.log(speed.moment / speed.load))) - 1
             if speed.moment > 0 and speed.load > 0 else 0.0)
    return max(speed.spread, moved)


def _judged(speed: Speed, old: CaseRecord, new: CaseRecord, machine: float) -> Speed:
    """``speed`` over the machine's change: its ratio, p-value and interval."""
    a, b = _times(old), [t / machine for t in _times(new)]
    low, high = bootstrap(a, b, speed.case)
    return replace(speed, ratio=speed.ratio / machine, p=mann_whitney(a, b), low=low,
                   high=high, load=machine)


def machine_change(speeds: Sequence[Speed]) -> float:
    """How much slower NEW's machine ran than OLD's: the median of numpy's ratios NEW/OLD
    over the pair's kernels (numpy ran the same code in both; 1 when not measured). One
    figure for the pair: numpy's own time, measured once a graph, is too noisy to take
    out a kernel's load one by one."""
    found = [s.moment for s in speeds if s.moment > 0]
    return math.exp(statistics.median(math.log(r) for r in found)) if found else 1.0


def pair_noise(ratios: Sequence[float], alpha: float = ALPHA) -> float:
    """How far the kernels of a pair move without a change (relative): the scaled median
    absolute deviation of their log ratios times the two-sided normal quantile of
    ``alpha / len(ratios)`` (no kernel past it but with probability ``alpha``, were the
    log ratios normal); 0 for fewer than :data:`NOISE_KERNELS`."""
    if len(ratios) < NOISE_KERNELS:
        return 0.0
    logs = [math.log(r) for r in ratios]
    centre = statistics.median(logs)
    mad = statistics.median(abs(x - centre) for x in logs)
    quantile = statistics.NormalDist().inv_cdf(1 - alpha / (2 * len(ratios)))
    return math.exp(quantile * 1.4826 * mad) - 1


def _group_noise(speeds: Sequence[Speed], alpha: float) -> tuple[float, float]:
    """The noise of the pair's kernels on one thread and of its threaded ones; a group of
    fewer than :data:`NOISE_KERNELS` takes the whole pair's."""
    whole = pair_noise([s.ratio for s in speeds], alpha)
    groups = [[s.ratio for s in speeds if s.threaded == threaded] for threaded in (False, True)]
    single, threaded = (pair_noise(g, alpha) if len(g) >= NOISE_KERNELS else whole
                        for g in groups)
    return single, threaded


def by_key(records: Sequence[CaseRecord]) -> dict[str, CaseRecord]:
    return {r.key: r for r in records}


def compare(old: Sequence[CaseRecord], new: Sequence[CaseRecord], *, old_name: str = "OLD",
            new_name: str = "NEW", alpha: float = ALPHA,
            threshold: float = THRESHOLD) -> Comparison:
    """The differences between the records of two bundles."""
    before, after = by_key(old), by_key(new)
    found = Comparison(old_name, new_name, test=TEST if (alpha, threshold) == (ALPHA, THRESHOLD)
                       else f"Mann-Whitney U p < {alpha} and the bootstrap interval of the "
                       f"ratio of medians beyond the larger of {threshold:.0%} and the noise")
    found.added = sorted(k for k in after if k not in before)
    found.gone = sorted(k for k in before if k not in after)
    speeds = []
    for key in sorted(before.keys() & after.keys()):
        was, now = before[key], after[key]
        if was.status != now.status:
            found.changed.append(Change(key, was.status, now.status))
            continue
        got = _candidate(key, was, now)
        if isinstance(got, Speed):
            speeds.append(got)
        elif got == "short":
            found.short += 1
        else:
            found.untimed += bool(_times(was) or _times(now))
    found.timed = len(speeds)
    found.machine = machine_change(speeds)
    speeds = [_judged(s, before[s.case], after[s.case], found.machine) for s in speeds]
    found.noise, found.threaded_noise = _group_noise(speeds, alpha)
    found.effect = max(threshold, found.noise)
    found.threaded_effect = max(threshold, found.threaded_noise)
    for speed in speeds:
        group = found.threaded_effect if speed.threaded else found.effect
        held = replace(speed, effect=max(group, own_noise(speed)))
        if speed.p >= alpha:
            continue
        if speed.low > 1 + held.effect:
            found.slower.append(held)
        elif speed.high < 1 / (1 + held.effect):
            found.faster.append(held)
    found.slower.sort(key=lambda s: -s.ratio)
    found.faster.sort(key=lambda s: s.ratio)
    return found


def summarize(found: Comparison) -> Mapping[str, int]:
    return found.summary()
