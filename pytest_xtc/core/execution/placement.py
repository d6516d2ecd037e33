"""Checking operand placement in compiled IR, read through the MLIR Python bindings.

XTC marks an operand placed on an accelerator with the unit attribute ``memref.on_device``
on its function argument; host operands carry none. The graph's function takes the graph
inputs in order, then its outputs. The source IR (``source.mlir`` in a case's work
directory, XTC's ``xdsl_func`` before any lowering) is checked against ``case.placement``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_xtc.core.cases import graphs
from pytest_xtc.core.cases.case import DEVICE

if TYPE_CHECKING:
    from pytest_xtc.core.cases.case import Case

SOURCE_IR = "source.mlir"
ON_DEVICE = "memref.on_device"


def walk(op: Any) -> Iterator[Any]:
    """``op`` (an MLIR operation, or a module) and every operation nested in it."""
    operation = getattr(op, "operation", op)
    yield operation
    for region in operation.regions:
        for block in region.blocks:
            for nested in block.operations:
                yield from walk(nested)


def with_module(text: str, visit: Callable[[Any], Any]) -> Any:
    """Parse ``text`` as MLIR in a fresh context and return ``visit(module)``."""
    from mlir.ir import Context, Module

    with Context():
        return visit(Module.parse(text))


def device_flags(text: str, func_name: str | None = None) -> tuple[str, list[bool]]:
    """The graph function's name and, per argument, whether it carries ``memref.on_device``.

    ``func_name`` picks the function when the IR holds several.
    """

    def visit(module: Any) -> tuple[str, list[bool]]:
        funcs = [op for op in walk(module) if op.name == "func.func"]
        named = [f for f in funcs if _symbol(f) == func_name]
        if len(funcs) != 1 and not named:
            found = ", ".join(f"@{_symbol(f)}" for f in funcs) or "none"
            raise AssertionError(f"cannot tell the graph's function (func.func found: {found})")
        func = (named or funcs)[0]
        n_args = len(func.regions[0].blocks[0].arguments)
        if "arg_attrs" not in func.attributes:
            return _symbol(func), [False] * n_args
        arg_attrs = func.attributes["arg_attrs"]
        return _symbol(func), [ON_DEVICE in _dict(arg_attrs[i]) for i in range(len(arg_attrs))]

    return with_module(text, visit)


def operand_names(case: Case) -> list[str]:
    """The graph function's arguments: the graph inputs in order, then its outputs."""
    return [o.name for o in [*graphs.inputs(case.graph), *graphs.outputs(case.graph)]]


def problems(case: Case, text: str) -> list[str]:
    """How the IR's ``memref.on_device`` marks differ from ``case.placement``."""
    names = operand_names(case)
    placement = case.placement or {}
    func, flags = device_flags(text, case.graph.get("name"))
    if len(flags) != len(names):
        return [f"@{func} has {len(flags)} arguments, the graph has {len(names)} operands "
                f"({', '.join(names)})"]
    found = []
    for index, (name, marked) in enumerate(zip(names, flags, strict=True)):
        wanted = placement.get(name) == DEVICE
        if wanted and not marked:
            found.append(f"operand {name} (argument {index} of @{func}) is placed on the device "
                         f"but lacks {ON_DEVICE}")
        elif marked and not wanted:
            found.append(f"operand {name} (argument {index} of @{func}) is placed on the host "
                         f"but carries {ON_DEVICE}")
    return found


def check(case: Case, directory: Path) -> None:
    """Raise AssertionError when ``directory/source.mlir`` does not place operands as
    ``case.placement`` says."""
    path = Path(directory) / SOURCE_IR
    if not path.is_file():
        raise AssertionError(f"no {SOURCE_IR} in {directory}: the placement cannot be checked")
    found = problems(case, path.read_text())
    if found:
        raise AssertionError(f"{path}: " + "; ".join(found))


def _symbol(op: Any) -> str:
    from mlir.ir import StringAttr

    return StringAttr(op.attributes["sym_name"]).value


def _dict(attr: Any) -> Any:
    from mlir.ir import DictAttr

    return DictAttr(attr)
