"""One module per ONNX op the importer translates: ``check`` says why a node cannot be
expressed exactly (:class:`~pytest_xtc.importer.model.NotImported`), ``build`` adds it to
a layer."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pytest_xtc.importer.model import Model, NotImported, attributes


def known_attributes(node: Any, known: Iterable[str]) -> dict[str, Any]:
    """The node's attributes; NotImported for one this translation does not understand."""
    found = attributes(node)
    unknown = sorted(set(found) - set(known))
    if unknown:
        raise NotImported(f"attribute {', '.join(unknown)} not understood")
    return found


def operands(node: Any, model: Model, count: int) -> list[str]:
    """The node's first ``count`` inputs, each of known shape and a supported dtype."""
    names = list(node.input[:count])
    if len(names) < count or not all(names):
        raise NotImported(f"expected {count} inputs")
    for name in names:
        model.shape(name)
        model.dtype(name)
    model.shape(node.output[0])
    return names


def refuse(reasons: Iterable[str]) -> None:
    """NotImported listing every reason (each once, in order), if there is any."""
    found = list(dict.fromkeys(reasons))
    if found:
        raise NotImported("; ".join(found))


def reason_of(step: Any, *args: Any) -> list[str]:
    """The reason ``step(*args)`` gives for refusing (NotImported), or none."""
    try:
        step(*args)
    except NotImported as exc:
        return [str(exc)]
    return []


def omission(xtc_op: str, parts: dict[str, tuple[str, str]]) -> str:
    """What an import left out, e.g. ``conv2d without its bias add: XTC has no add``."""
    words = " and ".join(w for w, _ in parts.values())
    needs = " or ".join(dict.fromkeys(n for _, n in parts.values()))
    return f"{xtc_op} without its {words}: XTC has no {needs}"
