"""Reading what a child sends up without believing it: a reply is pickled by a process that
ran a kernel (a case's worker) or an adapter (a host), either of which may write any bytes
into its reply pipe. A plain ``pickle.loads`` of them would call whatever function the
bytes name, in the process that forked the child: the template every later case starts
from, or pytest itself.

:func:`loads` takes only what a reply is made of: data classes, enums and exceptions of
this package, enums, the plain types of ``builtins`` (and their exceptions), paths, and
numpy's arrays, dtypes and scalars, each looked up in a module already imported (nothing
is imported to read a reply); any other global (a function, a module, a class with
behaviour) raises :class:`Unreadable` naming it. No pytest.
"""

from __future__ import annotations

import dataclasses
import enum
import io
import pickle
import sys
from collections.abc import Sequence
from typing import Any

#: Plain types of builtins and pathlib a reply may hold (calling them has no effect).
_PLAIN = frozenset({
    ("builtins", "frozenset"), ("builtins", "set"), ("builtins", "complex"),
    ("builtins", "bytearray"), ("builtins", "slice"), ("builtins", "range"),
    ("pathlib", "PosixPath"), ("pathlib", "PurePosixPath"), ("pathlib", "Path"),
    ("pathlib", "WindowsPath"), ("pathlib", "PureWindowsPath"),
})
#: Functions that rebuild a value and nothing else: numpy's arrays and scalars, objects
#: pickled with protocol 0 or 1.
_REBUILDERS = frozenset({
    ("numpy._core.numeric", "_frombuffer"), ("numpy.core.numeric", "_frombuffer"),
    ("numpy._core.multiarray", "_reconstruct"), ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "scalar"), ("numpy.core.multiarray", "scalar"),
    ("copyreg", "_reconstructor"),
})


class Unreadable(ValueError):
    """A reply that is not made of what a reply may hold; the message names what."""


def loads(data: bytes, buffers: Sequence[Any] = ()) -> Any:
    """``pickle.loads(data, buffers=buffers)`` taking only a reply's kinds of value."""
    return _load(_Checked(io.BytesIO(data), buffers=buffers))


def loads_plain(data: bytes) -> Any:
    """``pickle.loads(data)`` for a stream of plain values (tuples, numbers, bytes): any
    global refused."""
    return _load(_Plain(io.BytesIO(data)))


def _load(unpickler: pickle.Unpickler) -> Any:
    try:
        return unpickler.load()
    except Unreadable:
        raise
    except Exception as exc:  # a truncated or forged stream
        raise Unreadable(f"not a reply ({type(exc).__name__}: {exc})") from None


class _Plain(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise Unreadable(f"refers to {module}.{name} where plain values belong")


class _Checked(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        return allowed(module, name)


def allowed(module: str, name: str) -> Any:
    """The global ``module.name`` when a reply may refer to it (looked up in a module
    already imported); else :class:`Unreadable`."""
    if (module, name) == ("builtins", "getattr"):  # an enum's member by name (Python 3.12)
        return _member
    found = _lookup(module, name)
    if (module, name) in _PLAIN or (module, name) in _REBUILDERS:
        return found
    if isinstance(found, type) and _data_class(module, found):
        return found
    raise Unreadable(f"refers to {module}.{name}, outside what a reply holds (a function, "
                     "a module or a class with behaviour)")


def _member(owner: Any, name: Any) -> Any:
    """``getattr(owner, name)`` as a reply may use it: a member of an enum (the enum
    itself taken by :func:`allowed`), looked up among its members; nothing else."""
    if isinstance(owner, type) and issubclass(owner, enum.Enum) and isinstance(name, str) \
            and name in owner.__members__:
        return owner.__members__[name]
    raise Unreadable(f"refers to builtins.getattr of {getattr(owner, '__name__', owner)!r:.60}"
                     f", {name!r:.60}, not a member of an enum")


def _lookup(module: str, name: str) -> Any:
    loaded = sys.modules.get(module)
    if loaded is None:
        raise Unreadable(f"refers to {module}.{name}, outside what a reply holds (a module "
                         "not imported here)")
    found: Any = loaded
    for part in name.split("."):
        if part.startswith("__"):
            raise Unreadable(f"refers to {module}.{name}, a private name")
        try:
            found = getattr(found, part)
        except AttributeError:
            raise Unreadable(f"refers to {module}.{name}, which does not exist") from None
    return found


def _data_class(module: str, found: type) -> bool:
    """Whether calling ``found`` only makes a value: an exception of builtins, a data
    class, enum or exception of this package, a numpy array, dtype or scalar type."""
    if issubclass(found, enum.Enum):  # a member looked up by its value (signal.Handlers)
        return True
    if module == "builtins":
        return issubclass(found, BaseException)
    if module.startswith("pytest_xtc"):
        return dataclasses.is_dataclass(found) or issubclass(found, BaseException)
    if module.startswith("numpy"):
        import numpy as np

        return issubclass(found, (np.ndarray, np.dtype, np.generic))
    return False


__all__ = ["Unreadable", "allowed", "loads", "loads_plain"]
