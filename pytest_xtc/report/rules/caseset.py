"""Case-set identity: which cases a bundle must hold, hashed, and how shards split them."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pytest_xtc.core.cases.case import Case
from pytest_xtc.core.cases.selectors import Traits
from pytest_xtc.report.parts.model import Target
from pytest_xtc.report.rules.profiles import profile_of


def ids_hash(ids: Iterable[str]) -> str:
    return hashlib.sha256("\n".join(sorted(ids)).encode()).hexdigest()


def case_set_hash(targets: Mapping[str, Target]) -> dict[str, Any]:
    keys = [f"{t}\t{i}" for t, e in targets.items() for i in e.case_set.ids]
    return {"sha256": ids_hash(keys), "count": len(keys)}


def case_entry(case: Case) -> dict[str, Any]:
    """A case as a case set lists it: id, profile, main op and the traits waivers select
    by (:meth:`pytest_xtc.core.cases.selectors.Traits.to_dict`: ops, dtype, placement,
    primitives)."""
    return {**Traits.of(case).to_dict(), "profile": profile_of(case), "op": case.op}


def target_case_set(cases: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A target's case set from its case entries (:func:`case_entry`), in suite order."""
    ids = [str(c["id"]) for c in cases]
    return {"sha256": ids_hash(ids), "count": len(ids), "cases": [dict(c) for c in cases]}


def shard_of(key: str, count: int) -> int:
    """The shard (1..count) of a case key ``<target>-<case id>``: stable everywhere."""
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") % count + 1


def required(target: str, entry: Target) -> dict[str, str]:
    """Case id -> profile of the cases this bundle must hold for ``target``."""
    shards = entry.shards
    return {
        c["id"]: c["profile"]
        for c in entry.case_set.cases
        if not shards or shard_of(f"{target}-{c['id']}", shards.count) in shards.indices
    }


def parse_shard(text: str) -> tuple[int, int]:
    """``I/N`` as (I, N); raises ValueError unless 1 <= I <= N."""
    index, _, count = text.partition("/")
    try:
        i, n = int(index), int(count)
    except ValueError:
        i = n = 0
    if not 1 <= i <= n:
        raise ValueError(f"--xtc-shard={text}: expected I/N with 1 <= I <= N, e.g. 1/2")
    return i, n
