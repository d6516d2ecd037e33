"""Schedule-space exploration: the schedules XTC's own search strategies pick. No pytest.

For each base case (a graph, shape and dtype with its plain schedule), every search
strategy XTC registers (``xtc.search.strategies.Strategies``) that applies to the graph
draws a pool of ``pool`` samples, ``strategy.sample(pool, seed)``, its seed derived from
the base seed, the case key and the strategy by a stable hash. Each sample becomes a case
whose :class:`~pytest_xtc.core.cases.case.Schedule` is the list of scheduler calls the strategy
made for it (recorded through :class:`~pytest_xtc.core.xtc.xtc_env.RecordingScheduler`), named
``explore-<strategy>-<index>of<pool>``: the runner, isolation, expectations and reports
take it as any case, and the name alone (with the base seed) regenerates it
(:func:`regenerate`).

A strategy that does not apply to a graph (its constructor or its sampler asserts) makes
no case; it is counted as *not applicable*. A sample whose ``generate`` raises is a case
whose schedule is ``refused``: the runner reports it as not supported, with a message
starting :data:`REFUSED`, apart from the target's failures; so is a sample that breaks a
precondition XTC documents but does not check (a parallelized reduction loop...): its
message starts :data:`BREAKS`.

XTC's sampler is not prefix-stable (``sample(2, s)`` is not the start of ``sample(8, s)``),
hence the pool size in every name.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pytest_xtc.core.adapters import cache_seal, declcache
from pytest_xtc.core.cases.case import Case, Schedule
from pytest_xtc.core.cases.schedule_rules import InvalidSchedule, UnknownLoop
from pytest_xtc.core.cases.textfile import UnreadableFile, read_bytes
from pytest_xtc.core.cases.unique_keys import loads_json
from pytest_xtc.core.versions import installed
from pytest_xtc.core.xtc.scheduling import GraphScheduler, main_loops

PREFIX = "explore"
#: The message of a refused sample starts with this.
REFUSED = "XTC refused this sample: "
#: A sample that breaks a precondition XTC's scheduler documents but does not check.
BREAKS = "the sample breaks a precondition of XTC's scheduler: "
#: The scheme of XTC's generic ``prt`` strategy (the others fix their own): all axes,
#: then a tile of all axes.
PRT_SCHEME = "TT"
_NAME = re.compile(rf"^{PREFIX}-(?P<strategy>[A-Za-z0-9_]+)-(?P<index>\d+)of(?P<pool>\d+)$")
_IN_ID = re.compile(rf"-{PREFIX}-(?P<strategy>[A-Za-z0-9_]+)-\d+of\d+(?:-|$)")
CACHE_ENV = "XTC_EXPLORE_CACHE"


@dataclass(frozen=True)
class Draw:
    """One explored schedule: sample ``index`` of ``strategy.sample(pool, seed)``."""

    strategy: str
    index: int
    pool: int

    @property
    def name(self) -> str:
        return f"{PREFIX}-{self.strategy}-{self.index}of{self.pool}"

    @classmethod
    def parse(cls, name: str) -> Draw | None:
        """The draw a schedule name stands for; None for a name that is not one."""
        match = _NAME.match(name)
        if match is None:
            return None
        return cls(match["strategy"], int(match["index"]), int(match["pool"]))


def strategy_of(case_id: str) -> str | None:
    """The strategy of an explored case's id (a test id with its target works too)."""
    match = _IN_ID.search(case_id)
    return match["strategy"] if match else None


def strategy_seed(base_seed: int, case_key: str, strategy: str) -> int:
    """The seed of a strategy's pool on one case: the same in every process and run."""
    digest = hashlib.sha256(f"{PREFIX}:{base_seed}:{case_key}:{strategy}".encode()).digest()
    return int.from_bytes(digest[:4], "little") >> 1


STRATEGIES_CACHE = "strategies-v1.json"  # a declcache file: XTC's strategy names


def strategy_names() -> list[str]:
    """The search strategies XTC registers (aliases left out), in its order. Asking XTC
    imports its MLIR backend (0.6 s), so the answer is kept (:mod:`declcache`) while
    XTC's version and its strategies module are unchanged: with the plan kept too,
    exploring imports no XTC in the pytest process."""
    key = declcache.module_key("xtc.search.strategies", installed("xtc-tools"))
    if key is not None:
        kept = declcache.load(STRATEGIES_CACHE).get(key)
        if isinstance(kept, list) and kept and all(isinstance(n, str) for n in kept):
            return list(kept)
    from pytest_xtc.core.xtc import xtc_env

    xtc_env.import_mlir_backend()
    from xtc.search.strategies import Strategies

    names = list(Strategies.names())
    if key is not None:
        declcache.store({key: names}, STRATEGIES_CACHE)
    return names


def make_strategy(name: str, graph: Any) -> Any:
    """XTC's strategy ``name`` on ``graph`` (``prt`` with :data:`PRT_SCHEME`)."""
    from xtc.search.strategies import Strategies

    if name == "prt":
        return Strategies.create(name, graph, scheme=PRT_SCHEME)
    return Strategies.create(name, graph)


def bases(cases: Iterable[Case]) -> list[Case]:
    """The cases exploration starts from: one per graph, shape and dtype with random
    values (its unscheduled case where there is one), its schedule made plain."""
    chosen: dict[tuple[str, str, str, str], Case] = {}
    for case in cases:
        if case.values != "random" or case.placement is not None:
            continue
        key = (case.source, case.op, case.dtype, case.shape)
        plain = not case.schedule.steps and case.schedule.descript is None
        if key not in chosen or (plain and chosen[key].schedule.steps):
            chosen[key] = case
    return [replace(c, schedule=Schedule(), tags=c.tags | {PREFIX}) for c in chosen.values()]


@dataclass
class Plan:
    """The explored cases, and per strategy the base cases it does not apply to."""

    cases: list[Case] = field(default_factory=list)
    not_applicable: dict[str, list[str]] = field(default_factory=dict)
    #: Base cases with an op XTC's MLIR backend does not lower: nothing to schedule.
    unscheduled: list[str] = field(default_factory=list)

    def counts(self, seen: Iterable[str] | None = None) -> dict[str, int]:
        """Per strategy, the base cases it does not apply to; with ``seen`` (case ids,
        e.g. the explored ones that ran), only the bases among them."""
        if seen is None:
            return {name: len(keys) for name, keys in self.not_applicable.items()}
        prefixes = {i.partition(f"-{PREFIX}-")[0] for i in seen}
        return {name: sum(k.rpartition("-")[0] in prefixes for k in keys)
                for name, keys in self.not_applicable.items()}


def _record(strategy: Any, graph: Any, sample: Sequence[int]) -> tuple[list[Any], str]:
    """The scheduler calls ``strategy`` makes for ``sample``, or why XTC refused it."""
    from pytest_xtc.core.execution.work import describe_failure
    from pytest_xtc.core.xtc import xtc_env

    scheduler = GraphScheduler(xtc_env.import_mlir_backend().Backend(graph), None)
    loops = main_loops(scheduler)
    recorder = xtc_env.RecordingScheduler(scheduler)
    try:
        strategy.generate(recorder, list(sample))
    except Exception as exc:
        return [], REFUSED + describe_failure(exc)
    try:  # a precondition XTC documents but does not check: never a target's failure
        for primitive, args in recorder.calls:
            loops = loops.after(primitive, args)
    except UnknownLoop:
        pass  # XTC's strategy and scheduler disagree on loop names: XTC fails to compile it
    except InvalidSchedule as exc:
        return [], f"{BREAKS}{exc}"
    return [[p, list(a)] for p, a in recorder.calls], ""


def _draws(base: Case, name: str, pool: int, base_seed: int, graph: Any) -> dict[str, Any]:
    """One strategy on one base case: ``{"na": reason}`` or ``{"samples": [...]}``."""
    try:
        strategy = make_strategy(name, graph)
        samples = list(strategy.sample(pool, strategy_seed(base_seed, base.key, name)))
    except Exception as exc:  # XTC asserts where a strategy does not fit the graph
        return {"na": f"{type(exc).__name__}: {exc}".strip()}
    if not samples:
        return {"na": "the strategy has no sample for this graph"}
    drawn = []
    for sample in samples:
        steps, refused = _record(strategy, graph, sample)
        drawn.append({"sample": [int(x) for x in sample], "steps": steps, "refused": refused})
    return {"samples": drawn}


def _case(base: Case, draw: Draw, entry: Mapping[str, Any]) -> Case:
    steps = tuple((str(p), tuple(a)) for p, a in entry["steps"])
    schedule = Schedule(draw.name, steps, refused=entry["refused"], drawn=True)
    return replace(base, schedule=schedule, tags=base.tags | {PREFIX, f"strategy={draw.strategy}"})


def _cache_file(
    bases_: Sequence[Case], pool: int, base_seed: int, names: Sequence[str]
) -> Path | None:
    text = json.dumps(
        [installed("xtc-tools"), BREAKS, pool, base_seed, list(names),
         [[c.key, c.source, c.graph] for c in bases_]],
        sort_keys=True, default=str,
    )
    digest = hashlib.sha256(text.encode()).hexdigest()[:24]
    kept = declcache.cache_file("explore")  # None: caches off, or no sealing key
    if kept is None:
        return None
    folder = Path(os.environ.get(CACHE_ENV) or kept)
    return folder / f"plan-{digest}.json"


def draw_all(
    bases_: Sequence[Case], pool: int, base_seed: int, names: Sequence[str] | None = None,
    cache: bool = True,
) -> dict[str, dict[str, Any]]:
    """Every strategy's pool on every base case, as data (base key -> strategy -> entry).
    Kept in a file of the suite's cache (or ``$XTC_EXPLORE_CACHE``) keyed by everything it
    depends on (XTC's version included), so that xdist workers and the controller draw
    once; sealed (:mod:`cache_seal`): a plan this user's suite did not write is drawn
    again (its samples and what they say XTC refused decide verdicts)."""
    from pytest_xtc.core.xtc import xtc_env

    names = list(names) if names is not None else strategy_names()
    path = _cache_file(bases_, pool, base_seed, names) if cache else None
    if path is not None:
        from filelock import FileLock

        path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(path) + ".lock"):
            kept = _kept_plan(path)
            if kept is not None:
                return kept
            drawn = _draw_all(bases_, pool, base_seed, names, xtc_env)
            sealed = cache_seal.seal(json.dumps(drawn).encode())
            if sealed is not None:
                declcache.replace_whole(path, sealed)
            return drawn
    return _draw_all(bases_, pool, base_seed, names, xtc_env)


def _kept_plan(path: Path) -> dict[str, dict[str, Any]] | None:
    try:
        raw = cache_seal.unseal(read_bytes(path, declcache.MAX_FILE_BYTES))
        kept = loads_json(raw.decode(), str(path)) if raw is not None else None
    except (UnreadableFile, ValueError):
        return None
    return kept if isinstance(kept, dict) else None


def _draw_all(bases_: Sequence[Case], pool: int, base_seed: int, names: Sequence[str],
              xtc_env: Any) -> dict[str, dict[str, Any]]:
    drawn: dict[str, dict[str, Any]] = {}
    lowered = xtc_env.mlir_ops()
    for base in bases_:
        if not set(base.ops) <= lowered:  # XTC's backend cannot schedule this graph at all
            drawn[base.id] = {}
            continue
        graph = xtc_env.build_graph(base)
        try:
            xtc_env.import_mlir_backend().Backend(graph)
        except Exception as exc:  # XTC's backend refuses the graph: its compile fails too
            why = f"XTC's backend refuses the graph: {type(exc).__name__}: {exc}".strip()
            drawn[base.id] = {name: {"na": why} for name in names}
            continue
        drawn[base.id] = {name: _draws(base, name, pool, base_seed, graph) for name in names}
    return drawn


def plan(
    cases: Iterable[Case], pool: int, base_seed: int, names: Sequence[str] | None = None,
    cache: bool = True,
) -> Plan:
    """The explored cases of ``cases`` (see :func:`bases`): ``pool`` samples from every
    strategy that applies, in a stable order."""
    if pool < 1:
        raise ValueError(f"the pool of samples must be at least 1, not {pool}")
    chosen = bases(cases)
    drawn = draw_all(chosen, pool, base_seed, names, cache)
    result = Plan()
    for base in chosen:
        if not drawn[base.id]:
            result.unscheduled.append(base.id)
        for name, entry in drawn[base.id].items():
            if "na" in entry:
                result.not_applicable.setdefault(name, []).append(base.id)
                continue
            for index, sample in enumerate(entry["samples"]):
                result.cases.append(_case(base, Draw(name, index, pool), sample))
    return result


def regenerate(base: Case, name: str, base_seed: int) -> Case:
    """The explored case a schedule name stands for, from ``base`` (its graph, shape and
    dtype) and the base seed alone. ValueError for a name that is not a draw, a strategy
    that does not apply, or an index past the pool."""
    from pytest_xtc.core.xtc import xtc_env

    draw = Draw.parse(name)
    if draw is None:
        raise ValueError(f"{name!r} is not an explored schedule ({PREFIX}-<strategy>-<i>of<n>)")
    (plain,) = bases([base])
    entry = _draws(plain, draw.strategy, draw.pool, base_seed, xtc_env.build_graph(plain))
    if "na" in entry:
        raise ValueError(f"strategy {draw.strategy} does not apply to {base.key}: {entry['na']}")
    if draw.index >= len(entry["samples"]):
        raise ValueError(f"{name}: the pool has {len(entry['samples'])} samples")
    return _case(plain, draw, entry["samples"][draw.index])


def rebuild(case_id: str, known: Sequence[Case], base_seed: int) -> Case | None:
    """The explored case ``case_id`` names, regenerated from its base among ``known``
    (the base's random-input case, unplaced: a placed target's suite holds placed ones)
    and the base seed; None for an id that is not an explored one or whose base is not
    known. ValueError as :func:`regenerate`."""
    if not strategy_of(case_id):
        return None
    base_id, _, name = case_id.partition(f"-{PREFIX}-")
    by_id = {c.key: replace(c, placement=None) for c in known}
    known = list(by_id.values())
    base = by_id.get(f"{base_id}-none") or next(
        (c for c in known if c.id.startswith(f"{base_id}-") and c.values == "random"
         and c.placement is None and c.id.count("-") == base_id.count("-") + 1),
        None,
    )
    return None if base is None else regenerate(base, f"{PREFIX}-{name}", base_seed)
