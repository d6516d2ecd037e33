"""What each installed adapter declares, without importing any adapter here: its entry
point (``registered``), options, and facts (numbered devices, determinism, expectations
file, placements), read in one-shot isolated children (all at once) and kept across
sessions by :mod:`declcache`.

Light to import (the standard library and :mod:`pytest_xtc.core.adapter`): a session that
only declares the adapters' options (``pytest --help``) loads no worker machinery; the
isolation module is imported only when a declaration must be read afresh.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cache, partial
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any

from pytest_xtc.core.adapter import OptionSpec, TargetAdapter, declared_placements
from pytest_xtc.core.adapters import declcache

GROUP = "pytest_xtc.targets"


class DuplicateTarget(ValueError):
    """Two entry points register one target name; the message names both distributions
    and how to choose between them."""


def _origin(ep: EntryPoint) -> str:
    dist = ep.dist
    return f"{dist.name if dist is not None else 'an unnamed distribution'} ({ep.value})"


@cache
def registered() -> dict[str, EntryPoint]:
    """Every adapter entry point, by target name. A name registered twice (by two
    distributions, or twice by one; the same class or not) raises DuplicateTarget: which
    one would win depends on the order of ``sys.path``, so none is picked."""
    found: dict[str, EntryPoint] = {}
    for ep in entry_points(group=GROUP):
        other = found.setdefault(ep.name, ep)
        if other is not ep:
            dists = sorted({d.name for d in (other.dist, ep.dist) if d is not None})
            choose = " or ".join(f"pip uninstall {d}" for d in dists) or "uninstall one"
            raise DuplicateTarget(
                f"target {ep.name!r} is registered twice, by {_origin(other)} and by "
                f"{_origin(ep)}; keep one: {choose} (or rename the target in that "
                f"distribution's {GROUP} entry points)"
            )
    return found


#: Names of the plugin's own options (``--xtc-<name>``): no adapter may declare one.
RESERVED_OPTIONS = frozenset(
    {
        "target",
        "strict",
        "list-targets",
        "cases",
        "case",
        "only-cases",
        "ignore-expectations",
        "no-isolation",
        "compile-timeout",
        "run-timeout",
        "repeat-check",
        "order-check",
        "update-expectations",
        "seed",
        "fuzz",
        "fuzz-seed",
        "repeat",
        "number",
        "min-repeat-ms",
        "report",
        "shard",
        "max-case-bytes",
        "probe-timeout",
        "explore",
        "shrink",
        "shrink-dir",
        "shrink-budget",
        "pack",
        "from-pack",
        "run-on",
    }
)
OPTIONS_LIMIT_S = 5.0  # to import an adapter module and read its options
_OPTION_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,40}$")


@dataclass(frozen=True)
class Declarations:
    """The adapters' options (valid ones, merged by name) and, per target, what is wrong
    with its declaration (import failure, crash, hang, bad or clashing options)."""

    options: tuple[OptionSpec, ...]
    problems: Mapping[str, tuple[str, ...]]
    numbered: frozenset[str] = frozenset()  # targets whose devices take NAME[ORDINAL]
    varying: frozenset[str] = frozenset()  # targets declaring deterministic = False
    #: the expectations file each adapter gives, where known without building it
    expectations: Mapping[str, str] = field(default_factory=dict)
    #: the placements each adapter class declares (``TargetAdapter.placements``)
    placements: Mapping[str, frozenset[str]] = field(default_factory=dict)


def adapter_options() -> list[OptionSpec]:
    """Options declared by every adapter whose declaration is valid; never raises."""
    return list(option_declarations().options)


@cache
def option_declarations() -> Declarations:
    """Each adapter's ``options``, checked; computed once per process. A declaration is
    taken from :mod:`declcache` while its sources are unchanged, else read in an isolated
    one-shot child under a time limit (the adapter module is never imported here), the
    children of all adapters at once."""
    found: dict[str, OptionSpec] = {}
    problems: dict[str, list[str]] = {}
    numbered, varying, expected, placed = set(), set(), {}, {}
    for name, (declared, trouble, facts) in sorted(_all_declared().items()):
        if facts.get("ordinals"):
            numbered.add(name)
        if not facts.get("deterministic", True):
            varying.add(name)
        beside = _default_expectations(name) if facts.get("default_expectations") else None
        if beside is not None:
            expected[name] = beside
        if isinstance(facts.get("placements"), list):
            placed[name] = frozenset(map(str, facts["placements"]))
        problems[name] = trouble
        for option in declared:
            other = found.get(option.name)
            if option.name in RESERVED_OPTIONS:
                trouble.append(f"option --xtc-{option.name} clashes with a built-in option")
            elif other is not None and other != option:
                trouble.append(f"option --xtc-{option.name} is declared differently elsewhere")
            elif not trouble:
                found.setdefault(option.name, option)
    bad = {k: tuple(v) for k, v in problems.items() if v}
    return Declarations(
        tuple(found.values()), bad, frozenset(numbered), frozenset(varying), expected, placed
    )


_Raw = tuple[list[dict[str, Any] | str], dict[str, Any]]


def _default_expectations(name: str) -> str | None:
    """The default expectations file of target ``name``'s adapter: beside the module its
    entry point names, found from the entry point alone (a cached declaration only says
    that the default is kept, so a cache cannot point at another file)."""
    source = declcache.module_file(registered()[name].module)
    return None if source is None else str(source.resolve().with_suffix(".expectations.yaml"))


def _all_declared() -> dict[str, tuple[list[OptionSpec], list[str], dict[str, Any]]]:
    """Every registered adapter's declaration: cached ones as they are, the others read
    in parallel (each in its own child), the good ones then cached."""
    entries = registered()
    cached = declcache.load()
    keys = {name: declcache.key(ep) for name, ep in entries.items()}
    raw: dict[str, _Raw | str] = {}
    for name, k in keys.items():
        hit = cached.get(k) if k else None
        if isinstance(hit, list) and len(hit) == 2:
            raw[name] = (hit[0], hit[1])
    missing = [name for name in entries if name not in raw]
    if missing:
        # Each thread only forks a child and waits for it (no import runs in this
        # process meanwhile, so no child inherits a half-held import lock): the
        # isolation machinery is imported first.
        from pytest_xtc.core.workers import isolation  # noqa: F401
        with ThreadPoolExecutor(max_workers=min(8, len(missing))) as pool:
            read = pool.map(lambda n: _read(entries[n]), missing)
            raw.update(zip(missing, read, strict=True))
        fresh: dict[str, Any] = {}
        for name in missing:
            k, value = keys[name], raw[name]
            if k is not None and not isinstance(value, str):
                fresh[k] = list(value)
        declcache.store(fresh)
    return {name: _checked(value) for name, value in raw.items()}


def _read(ep: EntryPoint) -> _Raw | str:
    """An entry point's raw declaration, or what went wrong reading it."""
    from pytest_xtc.core.workers import isolation

    try:
        if isolation.available():
            read = partial(_read_options, ep)
            raw: _Raw = isolation.call_isolated(read, OPTIONS_LIMIT_S, "options")
            return raw
        return _read_options(ep)
    except isolation.ChildFailure as exc:
        return f"reading its options {exc.cause}"
    except Exception as exc:
        return f"{exc}"


def _checked(raw: _Raw | str) -> tuple[list[OptionSpec], list[str], dict[str, Any]]:
    """The options of a raw declaration, the problems found, and its facts."""
    if isinstance(raw, str):
        return [], [raw], {}
    fields_list, facts = raw
    options, trouble = [], []
    for fields in fields_list:
        if isinstance(fields, str):
            trouble.append(fields)
            continue
        option = OptionSpec(**{**fields, "choices": _tuple(fields.get("choices"))})
        if not _OPTION_NAME.match(option.name):
            trouble.append(f"option name {option.name!r} is not lower-case words and dashes")
        else:
            options.append(option)
    return options, trouble, facts


def _tuple(value: Any) -> tuple[str, ...] | None:
    return None if value is None else tuple(value)


def _read_options(ep: EntryPoint) -> _Raw:
    """In the child: the factory's ``options`` as plain fields (or a problem, as text),
    and its facts: ``ordinals``, ``deterministic`` and, when the factory is an adapter
    class defined in the entry point's own module that keeps the default
    ``expectations_file``, ``default_expectations`` (its path is then found from the entry
    point, never taken from the cache: :func:`_default_expectations`),
    and its declared ``placements`` (a frozenset of names)."""
    try:
        factory = ep.load()
    except BaseException as exc:  # SystemExit at import included
        raise RuntimeError(f"{type(exc).__name__}: {exc}") from None
    declared = getattr(factory, "options", ())
    facts: dict[str, Any] = {
        "ordinals": getattr(factory, "ordinals", False) is True,
        "deterministic": getattr(factory, "deterministic", True) is not False,
    }
    if (
        isinstance(factory, type)
        and issubclass(factory, TargetAdapter)
        and factory.expectations_file is TargetAdapter.expectations_file
    ):
        source = Path(inspect.getfile(factory)).resolve()
        entry_module = declcache.module_file(ep.module)
        if entry_module is not None and entry_module.resolve() == source:
            facts["default_expectations"] = True
    placements = declared_placements(factory) if isinstance(factory, type) else None
    if placements is not None and all(isinstance(p, str) for p in placements):
        facts["placements"] = sorted(placements)
    if isinstance(declared, (str, bytes)) or not isinstance(declared, Sequence):
        return [f"options is a {type(declared).__name__}, not a sequence of OptionSpec"], facts
    result: list[dict[str, Any] | str] = []
    for option in declared:
        if not isinstance(option, OptionSpec):
            result.append(f"options holds a {type(option).__name__}, not an OptionSpec")
            continue
        choices = None if option.choices is None else list(map(str, option.choices))
        result.append(
            {
                "name": str(option.name),
                "help": str(option.help),
                "env": None if option.env is None else str(option.env),
                "choices": choices,
                "pattern": None if option.pattern is None else str(option.pattern),
                "expected": str(option.expected),
            }
        )
    return result, facts
