"""YAML and JSON read with every mapping's keys unique and their nesting bounded: a key
given twice is refused, in one line naming the file, the key and the line (readers differ
on which value counts, and PyYAML and ``json`` silently keep the last); nesting deeper
than :data:`MAX_DEPTH` is refused, its brackets counted before any parser sees them
(PyYAML's own parser takes time quadratic in their depth: a 200 kB case file of 100,000
nested ``[`` held a session's collection for hours; ``json`` ends in a RecursionError),
YAML's block collections as libyaml opens them. Every YAML and JSON file the suite reads
goes through here. No pytest."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import yaml

#: libyaml's parser where PyYAML was built with it (several times faster), else PyYAML's own
_SAFE_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


#: The deepest nesting accepted in any YAML or JSON file the suite reads (case files nest
#: about eight levels, bundles six).
MAX_DEPTH = 64

_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|([\[\]{}])', re.DOTALL)
#: Brackets outside YAML's quoted scalars and comments (a plain scalar's, ``a[b``, are
#: counted too: past MAX_DEPTH of them open is no file of the suite's either).
_YAML_TOKENS = re.compile(
    r'"(?:[^"\\]|\\.)*"|\'(?:[^\']|\'\')*\'|(?<![^\s])#[^\n]*|([\[\]{}])', re.DOTALL)


class TooDeep(yaml.YAMLError, ValueError):
    """Nesting deeper than :data:`MAX_DEPTH` (a YAML error and a ValueError, as the
    parsers' own errors are); the message, one line, says where."""

    def __init__(self, kind: str, line: int) -> None:
        super().__init__(f"{kind} nested deeper than {MAX_DEPTH} levels at line {line}; no "
                         "file the suite reads nests so deep: write it flatter")
        self.line = line


def check_nesting(text: str, kind: str = "JSON") -> None:
    """Raise :class:`TooDeep` when ``text`` (``kind``: "JSON", or "YAML") nests brackets
    deeper than :data:`MAX_DEPTH`, counted in one pass without recursion (strings, and
    YAML's comments, skipped)."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return
    level = 0
    for match in (_YAML_TOKENS if kind == "YAML" else _JSON_TOKENS).finditer(text):
        bracket = match.group(1)
        if bracket is None:
            continue
        if bracket in "[{":
            level += 1
            if level > MAX_DEPTH:
                raise TooDeep(kind, text.count("\n", 0, match.start()) + 1)
        elif level:
            level -= 1


def yaml_events(text: str) -> Iterator[yaml.Event]:
    """The YAML events of ``text``, by libyaml where PyYAML has it; :class:`TooDeep` past
    :data:`MAX_DEPTH` collections (block or flow) open at once. Brackets are counted
    before any parser runs (PyYAML's own is quadratic in their depth; libyaml scans ahead
    up to its own limit of 1,000), the collections as they open."""
    check_nesting(text, "YAML")
    level = 0
    for event in yaml.parse(text, Loader=_SAFE_LOADER):
        if isinstance(event, yaml.CollectionStartEvent):
            level += 1
            if level > MAX_DEPTH:
                raise TooDeep("YAML", event.start_mark.line + 1)
        elif isinstance(event, yaml.CollectionEndEvent):
            level -= 1
        yield event


def check_yaml_nesting(text: str) -> None:
    """Raise :class:`TooDeep` past :data:`MAX_DEPTH` collections open at once in ``text``
    (one pass of :func:`yaml_events`)."""
    for _ in yaml_events(text):
        pass


def compose(text: str) -> yaml.Node | None:
    """The YAML tree of ``text``, by libyaml where PyYAML has it; its nesting checked
    already (:func:`yaml_events` or :func:`check_yaml_nesting`)."""
    return yaml.compose(text, Loader=_SAFE_LOADER)


class DuplicateKey(ValueError):
    """A mapping names one key twice; the message names the file, the key and the line."""

    def __init__(self, where: str, key: Any, line: int, first: int | None) -> None:
        super().__init__(_message(where, key, line, first))
        self.key, self.line, self.first = key, line, first


def _message(where: str, key: Any, line: int, first: int | None) -> str:
    earlier = f" (first at line {first})" if first else ""
    return (f"{where}:{line}: key {key!r} given twice in one mapping{earlier}; "
            "keep only one of them")


class UniqueKeyLoader(_SAFE_LOADER):  # type: ignore[misc,valid-type]
    """PyYAML's safe loader, refusing a mapping that names a key twice (``<<`` merges
    apart). ``name`` is the file named in messages."""

    name = "<yaml>"

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + 1
                try:
                    first = seen.get(key)
                    seen.setdefault(key, line)
                except TypeError:  # an unhashable key: the base loader refuses it
                    continue
                if first is not None:
                    raise DuplicateKey(self.name, key, line, first)
        return super().construct_mapping(node, deep)


def load_yaml(text: str, where: str) -> Any:
    """``yaml.safe_load(text)`` refusing duplicate keys (DuplicateKey, naming ``where``);
    other YAML errors raise as ``yaml.YAMLError`` (:class:`TooDeep` among them)."""
    check_yaml_nesting(text)
    loader = UniqueKeyLoader(text)
    loader.name = where
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def yaml_duplicate(node: yaml.Node, where: str) -> None:
    """Refuse a key given twice in any mapping of a composed YAML tree (DuplicateKey)."""
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, yaml.MappingNode):
            seen: dict[tuple[str, str], int] = {}
            for key_node, value_node in current.value:
                if isinstance(key_node, yaml.ScalarNode):
                    line = key_node.start_mark.line + 1
                    ident = (key_node.tag, key_node.value)
                    if ident in seen:
                        raise DuplicateKey(where, key_node.value, line, seen[ident])
                    seen[ident] = line
                stack += [key_node, value_node]
        elif isinstance(current, yaml.SequenceNode):
            stack += current.value


class _Repeated(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise _Repeated(key)
        found[key] = value
    return found


def loads_json(text: str, where: str, first_line: int = 1) -> Any:
    """``json.loads(text)`` refusing an object that names a key twice (DuplicateKey naming
    ``where``, the key and its line, ``text`` starting at line ``first_line``); other
    errors raise as ``ValueError`` (:class:`TooDeep` among them)."""
    check_nesting(text)
    try:
        return json.loads(text, object_pairs_hook=_unique)
    except _Repeated as exc:
        line, first = json_duplicate_line(text, exc.key)
        shift = first_line - 1
        raise DuplicateKey(where, exc.key, line + shift, first and first + shift) from None


_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]:]')


def json_duplicate_line(text: str, key: str) -> tuple[int, int | None]:
    """The line of the first repeated ``key`` of one JSON object in ``text`` and of its
    first occurrence (1, None when not found: the text is then not the one parsed)."""
    stack: list[dict[str, int] | None] = []
    last: tuple[str, int] | None = None
    line, counted = 1, 0
    for match in _TOKENS.finditer(text):
        token = match.group()
        line += text.count("\n", counted, match.start())
        counted = match.start()
        if token == "{":
            stack.append({})
        elif token == "[":
            stack.append(None)
        elif token in "}]":
            if stack:
                stack.pop()
        elif token == ":":
            keys = stack[-1] if stack else None
            if keys is not None and last is not None:
                name, at = last
                if name == key and name in keys:
                    return at, keys[name]
                keys.setdefault(name, at)
        else:
            last = (json.loads(token), line)
            continue
        last = None
    return 1, None
