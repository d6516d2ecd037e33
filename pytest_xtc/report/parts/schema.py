"""Reading a bundle's JSON into typed parts, strictly, and writing it back unchanged. No
pytest.

Each part of a bundle (:mod:`.records`, :mod:`.model`) is a frozen dataclass whose fields
are its JSON keys: a field without a default is a required key, one with a default an
optional key. ``from_dict`` refuses an unknown key, a missing required key and a value of
the wrong kind, with one line naming the file and the key (a bundle is untrusted input);
``to_dict`` gives back exactly the keys read (``present``), so a bundle read and written
again is the same JSON, byte for byte.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, TypeVar

from pytest_xtc.report.parts.reasons import Reason

Convert = Callable[[Any, str], Any]
Keys = Mapping[str, Convert]  # a part's keys and how each value is read
P = TypeVar("P", bound="Part")


class SchemaError(ValueError):
    """A bundle file that breaks the schema; the message is one line: file, key, problem."""


def fail(where: str, problem: str) -> SchemaError:
    return SchemaError(f"{where} {problem}" if where.endswith(":") else f"{where}: {problem}")


def child(where: str, key: str) -> str:
    """Where key ``key`` of the part at ``where`` is ("report.json: targets.host")."""
    return f"{where} {key}" if where.endswith(":") else f"{where}.{key}"


def kind(*types: type) -> Convert:
    """A converter accepting values of these JSON kinds (bool is not an int here)."""

    def convert(value: Any, where: str) -> Any:
        if isinstance(value, bool) and bool not in types:
            raise fail(where, f"expected {'/'.join(t.__name__ for t in types)}, got bool")
        if not isinstance(value, types):
            names = "/".join("null" if t is type(None) else t.__name__ for t in types)
            got = "null" if value is None else type(value).__name__
            raise fail(where, f"expected {names}, got {got}")
        return value

    return convert


def plain(value: Any, where: str) -> Any:
    """Any JSON value, kept as it is (a part whose schema lives elsewhere, e.g. perf.py)."""
    return value


def list_of(item: Convert) -> Convert:
    """A JSON list, read as a tuple of items."""

    def convert(value: Any, where: str) -> tuple[Any, ...]:
        kind(list)(value, where)
        return tuple(item(v, f"{where}[{i}]") for i, v in enumerate(value))

    return convert


def map_of(item: Convert) -> Convert:
    """A JSON object of any keys, its values read by ``item``."""

    def convert(value: Any, where: str) -> dict[str, Any]:
        kind(dict)(value, where)
        return {k: item(v, child(where, k)) for k, v in value.items()}

    return convert


def optional(convert: Convert) -> Convert:
    """``convert``, or null."""
    return lambda value, where: None if value is None else convert(value, where)


def word(enum_type: type[enum.Enum]) -> Convert:
    """One of an Enum's values."""

    def convert(value: Any, where: str) -> enum.Enum:
        try:
            return enum_type(value)
        except ValueError:
            raise fail(where, f"unknown {enum_type.__name__.lower()} {value!r}") from None

    return convert


STR, INT, BOOL = kind(str), kind(int), kind(bool)
NUMBER = kind(int, float, str)  # a non-finite float is stored as its string
OBJECT = kind(dict)  # a JSON object, read as it is


def part(cls: type[P]) -> Convert:
    return lambda value, where: cls.from_dict(value, where)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Part:
    """A part of a bundle's JSON; subclasses list each key's converter in ``KEYS``."""

    #: Key -> how its value is read (every field but ``present`` has one).
    KEYS: ClassVar[Keys] = {}
    #: The optional keys the data held; None: every key (a part built by this tool).
    present: frozenset[str] | None = dataclasses.field(default=None, compare=False, repr=False)

    @classmethod
    def required_keys(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls) if f.name != "present"
                and f.default is dataclasses.MISSING
                and f.default_factory is dataclasses.MISSING]

    @classmethod
    def from_dict(cls: type[P], data: Any, where: str) -> P:
        """The part ``data`` holds; ``where`` names it ("report.json: targets.host")."""
        if not isinstance(data, Mapping):
            raise fail(where, f"expected an object, got {type(data).__name__}")
        unknown = [k for k in data if k not in cls.KEYS]
        if unknown:
            raise fail(where, f"unknown key {str(unknown[0])[:60]!r}")
        required = cls.required_keys()
        missing = [k for k in required if k not in data]
        if missing:
            raise fail(where, f"missing key {missing[0]!r}")
        values = {k: cls.KEYS[k](v, child(where, k)) for k, v in data.items()}
        return cls(**values, present=frozenset(k for k in data if k not in required))

    def to_dict(self) -> dict[str, Any]:
        """The JSON object this part was read from (or would be written as)."""
        required = self.required_keys()
        return {
            name: to_json(getattr(self, name)) for name in self.KEYS
            if name in required or self.present is None or name in self.present
        }

    def has(self, name: str) -> bool:
        """Whether the optional key ``name`` was in the data."""
        return self.present is None or name in self.present


def to_json(value: Any) -> Any:
    """Parts, enums, tuples and mappings as plain JSON data."""
    if isinstance(value, Part):
        return value.to_dict()
    if isinstance(value, Reason):
        return value.text
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, Mapping):
        return {k: to_json(v) for k, v in value.items()}
    return value
