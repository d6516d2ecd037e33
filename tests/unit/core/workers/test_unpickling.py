"""What a child sends up is not believed: a reply's kinds of value come through; a global
that would run anything (a function, a module, a class with behaviour, a module not
imported here) is refused, naming it."""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_xtc.core.adapter import Capabilities, Probe, Tier
from pytest_xtc.core.execution.work import Call, Work
from pytest_xtc.core.outcome import Failure, FailureKind, Phase
from pytest_xtc.core.workers import isolation, unpickling
from pytest_xtc.core.workers.children import ChildFailure
from pytest_xtc.core.workers.serving import HandlerError, Message


def replies() -> list[Any]:
    """What workers and hosts send: results, failures, query answers."""
    arrays = [np.arange(12.0).reshape(3, 4), np.arange(12.0, dtype=np.float32).reshape(3, 4).T,
              np.zeros(70_000, np.float16)]
    work = Work(Phase.CHECK, times=[np.float64(1.5e-6)], compile_s=0.1,
                calls=[Call([None, arrays[2]], arrays[:2], ["out of bounds"], timed=True)],
                kind=FailureKind(Failure.SIGNAL, "SIGSEGV"), notes=["a note"])
    return [
        Message("result", work, 7, ("a note",)),
        Message("phase", "compile", 8),
        Message("error", ChildFailure("run", "crashed", "killed", FailureKind(Failure.TIMEOUT)), 9),
        Message("error", HandlerError("SystemExit: 3"), 10),
        Message("error", ValueError("an adapter's error"), 11),
        Probe(Tier.EXECUTE, "", {"xtc": "0.3.2"}, "cpu"),
        Capabilities(frozenset({"matmul"}), frozenset({"float32"}), frozenset({"host"}), None),
        (1.0, 2.0), Path("/tmp/expectations.yaml"), np.dtype("float32"), complex(1, 2),
    ]


@pytest.mark.parametrize("value", replies(), ids=lambda v: type(v).__name__)
def test_a_replys_kinds_of_value_come_through(value: Any) -> None:
    data = pickle.dumps(value, protocol=5)
    assert pickle.dumps(unpickling.loads(data)) == pickle.dumps(pickle.loads(data))


class Payload:
    def __init__(self, function: Any, *args: Any) -> None:
        self.function, self.args = function, args

    def __reduce__(self) -> tuple[Any, ...]:
        return (self.function, self.args)


@pytest.mark.parametrize(("payload", "named"), [
    (Payload(os.system, "true"), "posix.system"),
    (Payload(eval, "1"), "builtins.eval"),
    (Payload(getattr, "text", "upper"), "builtins.getattr"),
    (Payload(isolation.Worker, None), "pytest_xtc.core.workers.isolation.Worker"),
    (Payload(isolation.call_isolated, None, 1, "x"),
     "pytest_xtc.core.workers.isolation.call_isolated"),
    (Payload(np.load, "x.npy"), "numpy.load"),
])
def test_a_global_that_would_run_anything_is_refused(payload: Payload, named: str) -> None:
    """A plain ``pickle.loads`` would call these (a kernel writes such bytes into its
    reply pipe: test_children's ``forges-a-reply-setting-the-hosts-PATH``)."""
    with pytest.raises(unpickling.Unreadable, match=named.replace(".", r"\.")):
        unpickling.loads(pickle.dumps(payload, protocol=5))


def test_a_module_not_imported_here_is_not_imported_to_read_a_reply() -> None:
    """A vendor's class in a reply would import its module in pytest."""
    stream = pickle.dumps(Payload(ValueError, "x"), protocol=0, fix_imports=False)
    stream = stream.replace(b"cbuiltins\n", b"cvendorxyz\n")
    with pytest.raises(unpickling.Unreadable, match="vendorxyz"):
        unpickling.loads(stream)
    assert "vendorxyz" not in __import__("sys").modules


def test_plain_values_take_no_global_at_all() -> None:
    assert unpickling.loads_plain(pickle.dumps((b"x", [(0, 0, 1)], 3, [4]))) == (
        b"x", [(0, 0, 1)], 3, [4])
    with pytest.raises(unpickling.Unreadable, match=r"builtins\.complex"):
        unpickling.loads_plain(pickle.dumps(complex(1, 2)))


def test_a_truncated_stream_is_unreadable_not_an_error_of_another_kind() -> None:
    with pytest.raises(unpickling.Unreadable, match="not a reply"):
        unpickling.loads(pickle.dumps(replies()[0], protocol=5)[:40])


def test_an_enum_member_pickled_by_name_comes_through() -> None:
    """Python 3.11's first releases (and 3.12) pickle an enum member as
    ``getattr(Tier, 'EXECUTE')``: before, every probe of such a Python read "sent a reply
    that is not one: refers to builtins.getattr" and its target was skipped."""
    probe = Probe(Tier.EXECUTE, "", {}, "cpu")
    by_name = pickle.dumps(Message("result", Payload(getattr, Tier, "EXECUTE"), 1), protocol=5)
    assert unpickling.loads(by_name).value is Tier.EXECUTE
    assert unpickling.loads(pickle.dumps(probe, protocol=5)) == probe


@pytest.mark.parametrize("name", ["mro", "__class__", "_missing_", "EXECUTE "])
def test_getattr_of_anything_but_an_enums_member_is_refused(name: str) -> None:
    with pytest.raises(unpickling.Unreadable, match=r"builtins\.getattr .*not a member"):
        unpickling.loads(pickle.dumps(Payload(getattr, Tier, name), protocol=5))
