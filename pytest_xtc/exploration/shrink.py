"""Failure minimisation: the smallest case that still fails the same way. No pytest.

A failing case is reduced by a deterministic greedy loop, in the manner of Hypothesis's
shrinker and of delta debugging: it tries, in a fixed order, to drop graph nodes, to drop
schedule steps (with the loops they made), to halve or decrement input dimensions (every
shape re-derived through the op registry; invalid graphs are never tried), and to bring
tile and unroll factors down toward 1 and 2 (clamped to their dimension). Each candidate
is written as a user case file, loaded back as any ``--xtc-cases`` file would be, and run
through :func:`~pytest_xtc.core.execution.runner.run_case` on the same adapter with the same
settings (seed included): a candidate is kept when it fails *the same way*, that is in
the same stage with the same :class:`Kind` (wrong results, an exception's type, a crash
signal, a timeout). The loop stops when no candidate is kept, or at its budget of attempts
or seconds. The result is the last kept case file, and the command that reruns it.
"""

from __future__ import annotations

import copy
import math
import re
import shlex
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from pytest_xtc.core.adapter import TargetAdapter
from pytest_xtc.core.cases import graphs
from pytest_xtc.core.cases.case import Case, Schedule, load_case_file
from pytest_xtc.core.cases.graphs import GraphDict
from pytest_xtc.core.execution.settings import Settings
from pytest_xtc.core.outcome import Outcome, Phase, Status

SCHEDULE_NAME = "shrunk"
DEFAULT_ATTEMPTS = 200
DEFAULT_SECONDS = 300.0
_TILES = ("tile", "strip_mine")
_MAKES = ("tile", "strip_mine", "split")


@dataclass(frozen=True)
class Kind:
    """How a case failed: its stage (compile, placement, run) and the kind of error."""

    stage: str
    kind: str

    def __str__(self) -> str:
        return f"{self.stage}: {self.kind}"


def failure_kind(outcome: Outcome) -> Kind | None:
    """The kind of a failed (or errored) outcome; None for one that did not fail."""
    if outcome.status not in (Status.FAILED, Status.ERROR):
        return None
    stage = Phase(outcome.phase).stage
    message = outcome.message
    if message.startswith("wrong results"):
        return Kind(stage, "wrong results")
    if message.startswith("timed out") or "timed out after" in message:
        return Kind(stage, "timeout")
    signal = re.search(r"killed by signal (SIG[A-Z0-9]+)", message)
    if signal:
        return Kind(stage, f"signal {signal[1]}")
    code = re.search(r"exited with code (\d+)", message)
    if code:
        return Kind(stage, f"exit code {code[1]}")
    raised = re.search(r"(?:failed|raised)(?: [^:]*)?: ([A-Za-z_][\w.]*)(?::|\s|$)", message)
    if raised:
        return Kind(stage, raised[1])
    return Kind(stage, message.split(":")[0][:60] or "failure")


@dataclass(frozen=True)
class Budget:
    attempts: int = DEFAULT_ATTEMPTS
    seconds: float = DEFAULT_SECONDS


@dataclass
class Result:
    """What shrinking one failing case gave."""

    case: str  # the original case id
    target: str
    kind: Kind | None
    reproduced: bool  # the original case, as a case file, failed the same way
    before: str
    after: str = ""
    file: Path | None = None
    case_id: str = ""  # the id of the shrunk case (in its file)
    command: str = ""  # one line that reruns it
    attempts: int = 0
    seconds: float = 0.0
    message: str = ""  # the shrunk case's failure
    notes: list[str] = field(default_factory=list)

    def describe(self) -> str:
        if not self.reproduced:
            return (f"{self.target}-{self.case}: not shrunk: as a case file it does not fail "
                    f"the same way ({self.kind}); {'; '.join(self.notes)}")
        return (f"{self.target}-{self.case} ({self.kind}) shrunk from {self.before} to "
                f"{self.after} in {self.attempts} attempts ({self.seconds:.1f} s): "
                f"{self.file}\nrerun: {self.command}")

    def to_dict(self) -> dict[str, Any]:
        return {"case": self.case, "target": self.target, "kind": str(self.kind),
                "reproduced": self.reproduced, "before": self.before, "after": self.after,
                "file": str(self.file) if self.file else None, "case_id": self.case_id,
                "command": self.command, "attempts": self.attempts,
                "seconds": round(self.seconds, 3), "message": self.message}


@dataclass(frozen=True)
class State:
    """A candidate: a graph and a schedule, with the case's dtype and values."""

    graph: GraphDict
    schedule: Schedule

    def size(self) -> tuple[int, int, int, int]:
        """What shrinking lowers, most important first: nodes, steps, elements, factors."""
        elements = sum(math.prod(o.shape) for o in graphs.inputs(self.graph))
        factors = sum(_factor_total(args) for _, args in self.schedule.steps)
        return (len(self.graph["nodes"]), len(self.schedule.steps), elements, factors)


def describe(state: State) -> str:
    shapes = ", ".join("x".join(map(str, o.shape)) for o in graphs.inputs(state.graph))
    nodes, steps = len(state.graph["nodes"]), len(state.schedule.steps)
    described = " and a descript description" if state.schedule.descript is not None else ""
    return (f"inputs {shapes} ({nodes} node{'s' * (nodes != 1)}) with {steps} "
            f"step{'s' * (steps != 1)}{described}")


def _factor_total(args: Sequence[Any]) -> int:
    return sum(v for a in args if isinstance(a, Mapping) for v in a.values()
               if isinstance(v, int) and not isinstance(v, bool))


# -- the case file ---------------------------------------------------------------------


def graph_name(case: Case) -> str:
    """The shrunk case's graph name: never a built-in family's."""
    return re.sub(r"[^A-Za-z0-9_]", "_", case.op) + "_shrunk"


def case_file_data(state: State, case: Case, name: str) -> dict[str, Any]:
    """A user case file (the ``--xtc-cases`` format) holding one case."""
    data: dict[str, Any] = {"name": name}
    data.update({k: _plain(state.graph[k]) for k in ("inputs", "nodes", "outputs")})
    data["schedules"] = {SCHEDULE_NAME: _plain(state.schedule.to_data()) or []}
    data["dtypes"] = [case.dtype]
    data["values"] = [case.values]
    if case.exact_rule:
        data["error_rule"] = "exact"
    elif case.c != Case.c:
        data["error_rule"] = {"c": case.c}
    return data


def write_case_file(path: Path, state: State, case: Case, name: str, header: str = "") -> Case:
    """Write the case file, then load it back as ``--xtc-cases`` would: that case."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = yaml.safe_dump(case_file_data(state, case, name), sort_keys=False, width=100)
    comment = "".join(f"# {line}\n" for line in header.splitlines())
    path.write_text(comment + text)
    (loaded,) = load_case_file(path)
    return loaded


def _plain(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value


def rerun_command(target: str, file: Path, test_id: str, base_seed: int,
                  extra_args: Sequence[str] = ()) -> str:
    """The one line that reruns the shrunk case (``-k`` until ``--xtc-case=ID`` exists)."""
    return shlex.join(["pytest", f"--xtc-target={target}", f"--xtc-seed={base_seed}",
                       f"--xtc-cases={file}", *extra_args, "-p", "no:cacheprovider",
                       "-k", test_id])


# -- candidates ------------------------------------------------------------------------


def _valid(graph: GraphDict) -> bool:
    """The op registry takes the graph and every operand has a size above 0."""
    try:
        known = graphs.operands(graph)
    except Exception:
        return False
    return all(all(isinstance(d, int) and d > 0 for d in o.shape) for o in known.values())


def _with_input_dims(graph: GraphDict, changes: Mapping[tuple[int, int], int]) -> GraphDict:
    graph = copy.deepcopy(graph)
    for (i, axis), value in changes.items():
        graph["inputs"][i]["expr"]["type"]["shape"][axis] = value
    return graph


def shape_candidates(graph: GraphDict) -> Iterator[GraphDict]:
    """Smaller graphs: each input dimension halved, then decremented; alone, or with
    every input dimension of the same size (dimensions the shape rules tie together)."""
    dims = [(i, a, d) for i, o in enumerate(graphs.inputs(graph)) for a, d in enumerate(o.shape)]
    for i, axis, size in dims:
        for value in dict.fromkeys((size // 2, size - 1)):
            if value < 1 or value >= size:
                continue
            alone = _with_input_dims(graph, {(i, axis): value})
            if _valid(alone):
                yield alone
                continue
            tied = _with_input_dims(graph, {(j, b): value for j, b, d in dims if d == size})
            if _valid(tied):
                yield tied


def node_candidates(graph: GraphDict, schedule: Schedule) -> Iterator[tuple[GraphDict, Schedule]]:
    """Graphs of fewer nodes: an earlier node made the output (later nodes dropped), or a
    node that is not the output made an input of its shape (with what only fed it)."""
    nodes = graph["nodes"]
    if len(nodes) < 2:
        return
    known = graphs.operands(graph)
    for k in range(len(nodes) - 2, -1, -1):  # truncate after node k
        kept = copy.deepcopy(nodes[: k + 1])
        cut = _prune({**graph, "nodes": kept, "outputs": [{"uid": kept[-1]["uid"]}]})
        yield cut, _drop_node(schedule, {n.get("name") for n in nodes[k + 1:]})
    out_uids = {o["uid"] for o in graph["outputs"]}
    for node in nodes:  # make one node an input
        if node["uid"] in out_uids:
            continue
        operand = known[node["uid"]]
        entry = {"uid": node["uid"], "name": operand.name,
                 "expr": {"type": {"shape": list(operand.shape), "dtype": operand.dtype}}}
        rest = [copy.deepcopy(n) for n in nodes if n["uid"] != node["uid"]]
        cut = _prune({**graph, "inputs": [*copy.deepcopy(graph["inputs"]), entry],
                      "nodes": rest})
        yield cut, _drop_node(schedule, {node.get("name")})


def _prune(graph: GraphDict) -> GraphDict:
    """Drop the nodes and inputs nothing reaches the outputs through; inputs keep order."""
    needed = {o["uid"] for o in graph["outputs"]}
    for node in reversed(graph["nodes"]):
        if node["uid"] in needed:
            needed |= set(node["expr"]["args"])
    graph = dict(graph)
    graph["nodes"] = [n for n in graph["nodes"] if n["uid"] in needed]
    inputs = [i for i in graph["inputs"] if i["uid"] in needed]
    # Inputs come first in a graph dump: a node made an input moves before the nodes.
    graph["inputs"] = inputs
    return graph


def _drop_node(schedule: Schedule, gone: set[Any]) -> Schedule:
    return replace(schedule, node=None) if schedule.node in gone else schedule


def drop_step(steps: Sequence[tuple[str, tuple[Any, ...]]], index: int
              ) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    """The steps without step ``index``, and without the loops it made in the steps after
    it (a step left with nothing to act on goes too)."""
    primitive, args = steps[index]
    gone: set[str] = set()
    if primitive in _MAKES and len(args) > 1 and isinstance(args[1], Mapping):
        gone = set(args[1])
    kept: list[tuple[str, tuple[Any, ...]]] = []
    for later in steps[index + 1:]:
        name, a = later
        root = a[-1] if a and isinstance(a[-1], str) and a[-1].startswith(".") else None
        if root is not None and any(root == f"./{g}" or root.startswith(f"./{g}/")
                                    for g in gone):
            continue
        first = a[0] if a else None
        if isinstance(first, str):
            if first in gone:
                continue
            if name in _MAKES and len(a) > 1 and isinstance(a[1], Mapping):
                gone_inner = {k for k in a[1] if k in gone}
                if gone_inner:
                    continue
            kept.append(later)
        elif isinstance(first, list):
            left = [x for x in first if x not in gone]
            if left or not first:
                kept.append((name, (left, *a[1:])))
        elif isinstance(first, Mapping):
            left_map = {k: v for k, v in first.items() if k not in gone}
            if left_map or not first:
                kept.append((name, (left_map, *a[1:])))
        else:
            kept.append(later)
    return (*steps[:index], *kept)


def factor_candidates(steps: Sequence[tuple[str, tuple[Any, ...]]]
                      ) -> Iterator[tuple[tuple[str, tuple[Any, ...]], ...]]:
    """The steps with one tile, unroll or vector factor brought down: to 1, 2, about its
    half (both sides: a failure may need an odd factor), or by one."""
    for index, (primitive, args) in enumerate(steps):
        for position, arg in enumerate(args):
            if not isinstance(arg, Mapping) or primitive == "split":
                continue
            for key, value in arg.items():
                if isinstance(value, bool) or not isinstance(value, int):
                    continue
                for smaller in dict.fromkeys((1, 2, value // 2, value // 2 + 1, value - 1)):
                    if 1 <= smaller < value:
                        new_arg = {**arg, key: smaller}
                        new_args = (*args[:position], new_arg, *args[position + 1:])
                        yield (*steps[:index], (primitive, new_args), *steps[index + 1:])


def clamp_factors(steps: Sequence[tuple[str, tuple[Any, ...]]], sizes: Mapping[str, int]
                  ) -> tuple[tuple[str, tuple[Any, ...]], ...] | None:
    """The steps with every tile no larger than its dimension (and than the tile outside
    it) and every unroll factor no larger than its loop; None when a split cuts past its
    dimension. ``sizes``: the scheduled node's dimensions (unknown ones left alone)."""
    owner: dict[str, str] = {d: d for d in sizes}
    extent: dict[str, int] = dict(sizes)
    out: list[tuple[str, tuple[Any, ...]]] = []
    for primitive, args in steps:
        if primitive in _TILES and len(args) > 1 and isinstance(args[1], Mapping):
            dim = owner.get(str(args[0]))
            limit = extent.get(str(args[0]))
            tiles = {}
            for loop, size in args[1].items():
                if limit is not None and isinstance(size, int):
                    size = max(1, min(size, limit))
                    limit = size
                tiles[loop] = size
                if dim is not None:
                    owner[loop], extent[loop] = dim, size if isinstance(size, int) else 0
            args = (args[0], tiles, *args[2:])
        elif primitive == "split" and len(args) > 1 and isinstance(args[1], Mapping):
            limit = extent.get(str(args[0]))
            if limit is not None and any(s >= limit for s in list(args[1].values())[1:]):
                return None
            for segment in args[1]:
                owner[segment] = owner.get(str(args[0]), str(args[0]))
        elif primitive == "unroll" and args and isinstance(args[0], Mapping):
            args = ({k: (max(1, min(v, extent[k])) if k in extent and isinstance(v, int)
                         and extent[k] > 0 else v) for k, v in args[0].items()}, *args[1:])
        out.append((primitive, tuple(args)))
    return tuple(out)


def _dim_sizes(state: State, case: Case) -> dict[str, int]:
    """The scheduled node's dimensions and sizes, from XTC's backend ({} if unknown)."""
    try:
        from pytest_xtc.core.execution import xtc_env

        probe = replace(case, graph=state.graph, schedule=state.schedule, placement=None)
        backend = xtc_env.import_mlir_backend().Backend(xtc_env.build_graph(probe))
        scheduler = xtc_env.new_scheduler(backend, probe)
        root = scheduler.get_loop_nest().root_node.root
        return {str(k): int(v) for k, v in dict(backend.nodes[root].dims).items()}
    except Exception:
        return {}


def candidates(state: State, case: Case) -> Iterator[State]:
    """Every smaller candidate of ``state``, in the fixed order tried."""
    for graph, schedule in node_candidates(state.graph, state.schedule):
        if _valid(graph):
            yield State(graph, schedule)
    steps = state.schedule.steps
    for index in range(len(steps) - 1, -1, -1):
        yield State(state.graph, replace(state.schedule, steps=drop_step(steps, index)))
    for graph in shape_candidates(state.graph):
        smaller = State(graph, state.schedule)
        clamped = clamp_factors(steps, _dim_sizes(smaller, case))
        if clamped is not None:
            yield State(graph, replace(state.schedule, steps=clamped))
    for fewer in factor_candidates(steps):
        yield State(state.graph, replace(state.schedule, steps=fewer))


# -- the loop --------------------------------------------------------------------------


RunFn = Callable[[Case, Path], Outcome]


def shrink(
    adapter: TargetAdapter,
    case: Case,
    outcome: Outcome,
    out_dir: Path,
    settings: Settings | None = None,
    budget: Budget = Budget(),
    extra_args: Sequence[str] = (),
    workdir: Path | None = None,
    run: RunFn | None = None,
) -> Result:
    """Shrink one failing case of ``adapter`` into ``out_dir/<name>.yaml``."""
    from pytest_xtc.core.execution.runner import run_case

    settings = replace(settings or Settings(), perf=False, peak=False)
    kind = failure_kind(outcome)
    start = time.monotonic()
    state = State(copy.deepcopy(case.graph), replace(case.schedule, name=SCHEDULE_NAME,
                                                     refused=""))
    name = graph_name(case)
    out_dir = Path(out_dir)
    file = out_dir / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', f'{adapter.name}-{case.id}')}.yaml"
    scratch = Path(workdir or out_dir / ".shrink") / file.stem
    runner: RunFn = run or (lambda c, d: run_case(adapter, c, d, settings))
    result = Result(case.id, adapter.name, kind, False, describe(state))
    if kind is None:
        result.notes.append("the case did not fail")
        return result
    attempts = 0

    def fails_the_same(candidate: State) -> tuple[bool, str]:
        nonlocal attempts
        attempts += 1
        try:
            loaded = write_case_file(scratch / "candidate.yaml", candidate, case, name)
        except Exception as exc:  # a candidate the case-file reader refuses
            return False, f"{type(exc).__name__}: {exc}"
        got = runner(loaded, scratch / f"attempt-{attempts}")
        return failure_kind(got) == kind, got.message

    same, message = fails_the_same(state)
    if not same:
        result.notes.append(f"as a case file it gave: {message[:300]}")
        result.attempts, result.seconds = attempts, time.monotonic() - start
        return result
    result.reproduced, result.message = True, message
    improved = True
    while improved:
        improved = False
        for candidate in candidates(state, case):
            if attempts >= budget.attempts or time.monotonic() - start >= budget.seconds:
                result.notes.append("budget spent")
                break
            if candidate.size() >= state.size():
                continue
            same, message = fails_the_same(candidate)
            if same:
                state, result.message, improved = candidate, message, True
                break
    header = (f"Shrunk by pytest-xtc from {adapter.name}-{case.id} ({kind}):\n"
              f"from {result.before}\nto {describe(state)}")
    shrunk = write_case_file(file, state, case, name, header)
    test_id = f"{adapter.name}-{shrunk.id}"
    result.after, result.file, result.case_id = describe(state), file, shrunk.id
    result.command = rerun_command(adapter.name, file, test_id, settings.base_seed, extra_args)
    result.attempts, result.seconds = attempts, time.monotonic() - start
    return result


# -- a bundle --------------------------------------------------------------------------


def shrink_bundle(
    bundle_dir: Path,
    out_dir: Path,
    cases: Iterable[Case] | None = None,
    budget: Budget = Budget(),
    settings: Settings | None = None,
) -> list[Result]:
    """Shrink every failed case of a report bundle (``xtc-conformance shrink BUNDLE``).
    The bundle's first run gives the base seed, the adapters' options and the user case
    files (``--xtc-cases``, read again); each case is found by its id among the built-in
    suite, those files and ``cases``, an explored one regenerated from its id, and rerun on
    its target. A case that cannot be found or rebuilt gets a Result saying why."""
    from pytest_xtc.core.cases.case import load_case_paths
    from pytest_xtc.core.execution import registry
    from pytest_xtc.exploration import explore
    from pytest_xtc.report import bundle

    report, records, _ = bundle.load(Path(bundle_dir))
    run = (report.get("runs") or [{}])[0]
    recorded = run.get("settings") or {}
    seed = int(recorded.get("seed") or 0)
    options = dict(recorded.get("adapter_options") or {})
    args = list((run.get("command") or {}).get("args") or [])
    where = Path((run.get("command") or {}).get("dir") or ".")
    files = [a.split("=", 1)[1] for a in args if a.startswith("--xtc-cases=")]
    files += [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--xtc-cases"]
    from pytest_xtc.conformance import builtin_cases

    known = [*builtin_cases(), *load_case_paths([where / f for f in files]), *(cases or ())]
    by_id = {c.id: c for c in known}
    run_settings = replace(settings or Settings(), base_seed=seed)
    results: list[Result] = []
    adapters: dict[str, TargetAdapter] = {}
    for record in records:
        if record.get("status") != Status.FAILED.value:
            continue
        case_id, target = str(record["case"]), str(record["target"])
        case = by_id.get(case_id)
        if case is None and explore.strategy_of(case_id):
            base_id, _, name = case_id.partition(f"-{explore.PREFIX}-")
            base = by_id.get(f"{base_id}-none") or next(
                (c for c in known if c.id.startswith(f"{base_id}-") and c.values == "random"
                 and c.placement is None and c.id.count("-") == base_id.count("-") + 1),
                None,
            )
            if base is not None:
                try:
                    case = explore.regenerate(base, f"{explore.PREFIX}-{name}", seed)
                except Exception as exc:
                    results.append(Result(case_id, target, None, False, "", notes=[str(exc)]))
                    continue
        if case is None:
            results.append(Result(case_id, target, None, False, "",
                                  notes=["no such case in the suite or the bundle's case files"]))
            continue
        if target not in adapters:
            (adapters[target],) = registry.resolve(target, options)
        outcome = Outcome(case_id, target, Status(record["status"]), Phase(record["phase"]),
                          str(record.get("message", "")))
        extra = [f"--xtc-{k}={v}" for k, v in options.items() if v is not None]
        results.append(shrink(adapters[target], case, outcome, Path(out_dir), run_settings,
                              budget, extra))
    return results
