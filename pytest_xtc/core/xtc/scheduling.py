"""A case's schedule applied to XTC's scheduler: each ``{node: X}`` segment to node X's own
scheduler, all scheduled together in one compile (as XTC's ``mlir-loop`` does: one node
scheduler per node, given to the graph's scheduler), every step first checked against the
loops XTC's loop nest names and the kinds XTC's op gives them (:mod:`schedule_rules`).
A step that breaks a precondition raises :class:`InvalidSchedule`: the case's error."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pytest_xtc.core.cases.case import PRIMITIVE_PARAMS, Case, bind_step
from pytest_xtc.core.cases.schedule import plain
from pytest_xtc.core.cases.schedule_rules import InvalidSchedule, Loops

Step = tuple[str, tuple[Any, ...]]


class GraphScheduler:
    """XTC's scheduler of a graph whose current node is ``main`` (None: XTC's default, the
    last), built from one scheduler per node (``nodes``, by XTC's node name): steps on the
    graph scheduler go to ``main``; ``nodes[X]`` schedules X; ``schedule()`` takes all."""

    def __init__(self, backend: Any, main: str | None) -> None:
        self.nodes: dict[str, Any] = {n: impl.get_scheduler() for n, impl in backend.nodes.items()}
        if main is not None and main not in self.nodes:
            raise InvalidSchedule(f"node {main!r} is not a node XTC schedules "
                                  f"(its nodes: {', '.join(self.nodes)})")
        self.main_node = main if main is not None else list(self.nodes)[-1]
        self._inner = backend.get_scheduler(
            nodes_schedulers=list(self.nodes.values()), default_node=self.main_node
        )

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def node(self, name: str) -> Any:
        """The scheduler of node ``name``; InvalidSchedule naming XTC's nodes if none."""
        if name == self.main_node:
            return self._inner
        if name not in self.nodes:
            raise InvalidSchedule(f"node {name!r} is not a node XTC schedules "
                                  f"(its nodes: {', '.join(self.nodes)})")
        return self.nodes[name]


def new_scheduler(backend: Any, case: Case) -> Any:
    """A fresh scheduler of ``backend`` whose current node is the one the case's main
    schedule segment names (a :class:`GraphScheduler` where the backend has nodes)."""
    node = case.schedule.node
    if hasattr(backend, "nodes"):
        return GraphScheduler(backend, node)
    return backend.get_scheduler(default_node=node) if node else backend.get_scheduler()


def schedule(backend: Any, case: Case, extra: Sequence[Step] = ()) -> Any:
    """Apply the case's schedule (its ``descript`` description, then its scheduler calls,
    then ``extra``, a target's own) and schedule."""
    scheduler = new_scheduler(backend, case)
    apply_schedule(scheduler, case, extra)
    return scheduler.schedule()


def apply_schedule(scheduler: Any, case: Case, extra: Sequence[Step] = ()) -> list[Step]:
    """Apply the case's schedule to ``scheduler``, every step's loops checked: the main
    segment (after its ``descript`` description, then ``extra``) to the scheduler's
    current node, each other segment to its node. The calls made, in order.
    InvalidSchedule for a step breaking a precondition; a ValueError where XTC's own
    search strategy made the schedule (``drawn``): XTC's failure, not the case's."""
    try:
        return _apply(scheduler, case, extra)
    except InvalidSchedule as exc:
        if case.schedule.drawn:
            raise ValueError(f"XTC's search strategy made a step it cannot take: {exc}") from None
        raise


def _apply(scheduler: Any, case: Case, extra: Sequence[Step]) -> list[Step]:
    main = getattr(scheduler, "main_node", None) or case.schedule.node or "scheduled"
    loops = {main: _loops(scheduler, main)}
    made: list[Step] = []
    described = case.schedule.descript
    if described is not None:
        from xtc.schedules.descript import descript_scheduler

        recorder = RecordingScheduler(scheduler)
        dims = list(described.dims or scheduler.get_loop_nest().abstract_dims)
        descript_scheduler(recorder, ".", dims, described.spec, dict(described.sizes), [],  # type: ignore[arg-type]
                           dict(described.sample))
        for primitive, args in recorder.calls:
            loops[main] = loops[main].after(primitive, args)
        made += recorder.calls
    segments = [(main, (*case.schedule.steps, *extra))]
    segments += [(node, steps) for node, steps in case.schedule.others]
    for node, steps in segments:
        target = scheduler if node == main else _node_scheduler(scheduler, node)
        if node not in loops:
            loops[node] = _loops(target, node)
        for primitive, args in steps:
            loops[node] = loops[node].after(primitive, args)
            getattr(target, primitive)(*args)
            made.append((primitive, tuple(args)))
    return made


def _node_scheduler(scheduler: Any, node: str) -> Any:
    if not isinstance(scheduler, GraphScheduler):
        raise InvalidSchedule(f"node {node!r}: this scheduler schedules one node only")
    return scheduler.node(node)


def _loops(scheduler: Any, node: str) -> Loops:
    """The node's loops as XTC's loop nest names them, with the reductions XTC's graph op
    declares (its dims of kind ``R``, matched to the loops by position)."""
    dims = [str(d) for d in scheduler.get_loop_nest().abstract_dims]
    reductions: set[str] = set()
    try:
        graph = scheduler.backend.graph
    except AssertionError:  # a backend built from MLIR, not from a graph: no op kinds
        graph = None
    for graph_node in getattr(graph, "nodes", {}).values():
        if graph_node.name == node:
            operation = graph_node.operation
            op_dims, kinds = list(operation.dims), set(operation.dims_kind("R"))
            if len(op_dims) == len(dims):
                reductions = {d for d, o in zip(dims, op_dims, strict=True) if o in kinds}
            else:
                reductions = kinds & set(dims)
    return Loops.of_node(node, dims, sorted(reductions))


class RecordingScheduler:
    """An XTC scheduler that records every primitive called on it (``calls``: each as
    ``(primitive, positional args)``, keywords bound, trailing defaults dropped), then
    forwards it. XTC's search strategies and ``descript`` only call the scheduler's
    methods, so they take it in place of the scheduler."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.calls: list[Step] = []

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name not in PRIMITIVE_PARAMS:
            return attr

        def record(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((name, bind_step(name, plain(args), plain(kwargs))))
            return attr(*args, **kwargs)

        return record


def main_loops(scheduler: Any) -> Loops:
    """The loops of ``scheduler``'s current node, before any step is applied."""
    return _loops(scheduler, getattr(scheduler, "main_node", None) or "scheduled")
