"""The kernel cache's key is complete: for every family of the catalog, two cases that
differ in exactly one thing their compile reads (an attribute, a dtype, a shape, any other
part of the graph, a schedule parameter, a placement) get different keys, and so do two
adapters that differ in one thing besides the case (a target option, a toolchain version,
a program, an environment variable, the CPU, the suite's or the adapter's code). Each of
those left out of the key, the same pairs collide: the check fails (parametrized below).
The end-to-end tests (tests/acceptance/test_kernel_cache.py) show the second of such a
pair compiled afresh by the real host."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from pytest_xtc.conformance import builtin_cases
from pytest_xtc.core import versions
from pytest_xtc.core.adapter import TargetSpec
from pytest_xtc.core.cases.case import DEVICE, HOST, Case
from pytest_xtc.core.execution import kernels
from pytest_xtc.targets.host import HostTarget
from pytest_xtc.targets.host_c import HostCTarget

Pair = tuple[str, Case, Case]
GRAPH_PARTS = {"attrs": "attribute", "dtype": "dtype", "shape": "shape"}


def families() -> list[Case]:
    """Per family (op), its cases of distinct schedules (every schedule parameter)."""
    chosen: dict[tuple[str, str], Case] = {}
    for case in builtin_cases():
        chosen.setdefault((case.op, case.schedule.name), case)
    return list(chosen.values())


def changed(value: Any) -> Any:
    """Another leaf value of the same type."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return {"float32": "float64", "float64": "float32"}.get(value, value + "_x")
    return None


def leaves(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from leaves(item, (*path, key))
    elif isinstance(value, (list, tuple)):
        for n, item in enumerate(value):
            yield from leaves(item, (*path, n))
    elif dataclasses.is_dataclass(value):
        for f in dataclasses.fields(value):
            yield from leaves(getattr(value, f.name), (*path, f.name))
    else:
        yield path, value


def with_leaf(value: Any, path: tuple[Any, ...], leaf: Any) -> Any:
    """``value`` (dicts, lists, tuples, frozen dataclasses) with the leaf at ``path``."""
    if not path:
        return leaf
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: with_leaf(value[head], rest, leaf)}
    if isinstance(value, (list, tuple)):
        items = list(value)
        items[head] = with_leaf(items[head], rest, leaf)
        return type(value)(items)
    return dataclasses.replace(value, **{head: with_leaf(getattr(value, head), rest, leaf)})


def part_of(path: tuple[Any, ...]) -> str:
    found = [GRAPH_PARTS[p] for p in path if p in GRAPH_PARTS]
    return found[0] if found else "graph"


def case_pairs() -> Iterator[Pair]:
    """(what differs, a case, the same case with that one thing changed)."""
    for case in families():
        for path, value in leaves(case.graph):
            if (other := changed(value)) is not None:
                part = part_of(path)
                twin = dataclasses.replace(case, graph=with_leaf(case.graph, path, other))
                if part == "dtype":  # the case's own dtype label follows its operands'
                    twin = dataclasses.replace(twin, dtype=changed(case.dtype))
                yield part, case, twin
        for path, value in leaves(case.schedule):
            if path[0] != "name" and (other := changed(value)) is not None:
                yield "schedule", case, dataclasses.replace(
                    case, schedule=with_leaf(case.schedule, path, other))
        first = case.graph["inputs"][0]["name"]
        yield "placement", case, dataclasses.replace(case, placement={first: DEVICE})
        yield "placement", dataclasses.replace(case, placement={first: HOST}), \
            dataclasses.replace(case, placement={first: DEVICE})


def without(case: Case, part: str) -> Case:
    """``case`` as a key that leaves ``part`` out would see it."""
    graph = copy.deepcopy(case.graph)
    if part in ("attribute", "dtype", "shape"):
        name = next(k for k, v in GRAPH_PARTS.items() if v == part)
        _drop(graph, name)
        case = dataclasses.replace(case, graph=graph)
        if part == "dtype":
            case = dataclasses.replace(case, dtype="")
        return case
    if part == "graph":  # everything of the graph but attributes, dtypes and shapes
        return dataclasses.replace(case, graph={"kept": [
            [p, v] for p, v in leaves(case.graph) if part_of(p) != "graph"]})
    if part == "schedule":
        return dataclasses.replace(case, schedule=dataclasses.replace(
            case.schedule, steps=(), others=(), descript=None, backend=(), node=None))
    return dataclasses.replace(case, placement=None)


def _drop(value: Any, name: str) -> None:
    if isinstance(value, dict):
        value.pop(name, None)
        for item in value.values():
            _drop(item, name)
    elif isinstance(value, list):
        for item in value:
            _drop(item, name)


HOST_IDENTITY = {"identity": "fixed"}


def case_collisions(key: Callable[[Any, Case], str]) -> dict[str, int]:
    """How many pairs of each part get one key."""
    found: dict[str, int] = {}
    for part, first, second in case_pairs():
        if key(HOST_IDENTITY, first) == key(HOST_IDENTITY, second):
            found[part] = found.get(part, 0) + 1
    return found


CASE_PARTS = ("attribute", "dtype", "shape", "graph", "schedule", "placement")


def test_cases_differing_in_one_thing_their_compile_reads_get_other_keys() -> None:
    counts: dict[str, int] = {}
    for part, _, _ in case_pairs():
        counts[part] = counts.get(part, 0) + 1
    assert set(counts) == set(CASE_PARTS), counts  # every part is varied somewhere
    assert len({c.op for c in families()}) >= 11  # every family
    assert case_collisions(kernels.key) == {}


@pytest.mark.parametrize("part", CASE_PARTS)
def test_a_key_leaving_out_one_part_of_the_case_is_caught(part: str) -> None:
    def partial_key(identity: Any, case: Case) -> str:
        return kernels.key(identity, without(case, part))

    assert case_collisions(partial_key).get(part, 0) > 0


def test_every_field_of_a_case_is_in_the_key_or_read_only_by_its_run() -> None:
    """A field added to Case is in the key unless named run-only: never left out unseen."""
    case = families()[0]
    names = {f.name for f in dataclasses.fields(Case)}
    assert names >= kernels.RUN_ONLY
    for name in sorted(names - kernels.RUN_ONLY - {"twin"}):
        value = getattr(case, name)
        other = changed(value) if changed(value) is not None else {"x": "y"}
        assert kernels.key({}, case) != kernels.key({}, dataclasses.replace(case, **{name: other}))
    for name in sorted(kernels.RUN_ONLY - {"twin", "tags"}):
        other = changed(getattr(case, name))
        assert kernels.key({}, case) == kernels.key({}, dataclasses.replace(case, **{name: other}))


# -- the adapter's side: everything besides the case -------------------------------------


def identity(monkeypatch: pytest.MonkeyPatch, change: str = "", cls: type = HostTarget) -> Any:
    """The host adapter's kernel identity with one thing changed (a stub where real)."""
    with monkeypatch.context() as patch:
        options: dict[str, str | None] = {}
        if change == "target option":
            options["some-option"] = "1"
        if change == "toolchain version":
            real = versions.distribution_files
            patch.setattr(versions, "distribution_files",
                          lambda n: "0.3.3-stub" if n == "xtc-tools" else real(n))
        if change == "environment variable":
            patch.setenv("XTC_MLIR_TARGET", "c")
        if change == "program":
            patch.setattr(versions, "program", lambda n: [n, f"/opt/other/{n}", 1, 2])
        if change == "cpu":
            patch.setattr(versions, "cpu", lambda: ["x86_64", "flags=other"])
        if change == "sources":
            real_digest = versions.source_digest
            patch.setattr(versions, "source_digest", lambda p: "edited" + real_digest(p)[6:])
        adapter = cls(TargetSpec("host", "host", None, options))
        patch.setattr(adapter, "status", lambda: _PROBE)
        return adapter.kernel_identity()


from pytest_xtc.core.adapter import Probe, Tier  # noqa: E402

_PROBE = Probe(Tier.EXECUTE, "", {"xtc-tools": "0.3.2"}, "host CPU")
ADAPTER_PARTS = {"target option": "options", "toolchain version": "distributions",
                 "environment variable": "environment", "program": "programs", "cpu": "cpu",
                 "sources": "sources", "adapter class": "classes"}


def adapter_pairs(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Any, Any]]:
    base = identity(monkeypatch)
    for change in ADAPTER_PARTS:
        if change == "adapter class":
            yield change, base, identity(monkeypatch, cls=HostCTarget)
        else:
            yield change, base, identity(monkeypatch, change)


def test_adapters_differing_in_one_thing_besides_the_case_give_other_keys(
        monkeypatch: pytest.MonkeyPatch) -> None:
    case = families()[0]
    pairs = list(adapter_pairs(monkeypatch))
    assert [p for p, a, b in pairs if kernels.key(a, case) == kernels.key(b, case)] == []
    assert {k for _, a, b in pairs for k in a if a[k] != b[k]} == set(ADAPTER_PARTS.values())


@pytest.mark.parametrize("change", sorted(ADAPTER_PARTS))
def test_a_key_leaving_out_one_thing_of_the_adapter_is_caught(
        monkeypatch: pytest.MonkeyPatch, change: str) -> None:
    case, field = families()[0], ADAPTER_PARTS[change]
    collided = [p for p, a, b in adapter_pairs(monkeypatch)
                if kernels.key({**a, field: None}, case) == kernels.key({**b, field: None}, case)]
    assert change in collided


def test_an_adapter_that_does_not_opt_in_is_not_cached() -> None:
    class Plain(HostTarget):
        kernel_cache = None

    assert Plain(TargetSpec("host", "host")).kernel_identity() is None
    assert HostTarget.kernel_cache is not None and HostCTarget.kernel_cache is not None
