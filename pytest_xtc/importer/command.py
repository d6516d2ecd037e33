"""``xtc-conformance import MODEL.onnx --out DIR [--dim NAME=VALUE ...]``: the argument
parser and the run. ``onnx`` is imported here, when the command runs, and nowhere else
before it: without the ``onnx`` extra the command says which extra to install."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

EXTRA_HINT = "import needs the onnx package: pip install 'pytest-xtc[onnx]'"


class CommandError(Exception):
    """A one-line problem: the command prints it and exits 3, bad input (2 for a usage
    error; :mod:`pytest_xtc.exit_status`)."""

    def __init__(self, message: str, code: int = 3) -> None:
        super().__init__(message)
        self.code = code


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser("import", help="an ONNX model's layers as case files (needs "
                            "the onnx extra)")
    parser.add_argument("model", type=Path, metavar="MODEL.onnx")
    parser.add_argument("--out", required=True, type=Path, metavar="DIR",
                        help="folder for the case files (new or empty)")
    parser.add_argument("--dim", action="append", default=[], metavar="NAME=VALUE",
                        help="size of a symbolic dimension; repeatable")


def dims(pairs: Sequence[str]) -> dict[str, int]:
    found: dict[str, int] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name or not value.isdigit() or int(value) < 1:
            raise CommandError(f"--dim {pair}: expected NAME=VALUE with VALUE an integer "
                               "above 0", 2)
        found[name] = int(value)
    return found


def run(args: argparse.Namespace) -> int:
    """Import the model; print the table; 0 when some layer was imported."""
    sizes = dims(args.dim)
    try:
        import onnx  # noqa: F401  (the optional extra)
    except ImportError:
        raise CommandError(EXTRA_HINT, 2) from None
    from pytest_xtc.importer import chains, table, writer
    from pytest_xtc.importer.model import ModelError, load

    try:
        model = load(args.model, sizes)
        layers, skipped = chains.translate(model)
        if not layers:
            reasons = "; ".join(sorted({f"{s.op}: {s.reason}" for s in skipped})[:4])
            raise ModelError(f"{args.model}: no node XTC can express ({len(skipped)} nodes "
                             f"not imported: {reasons or 'the graph is empty'})")
        groups = writer.distinct(layers)
        files = [writer.case_file(model.name, i, g) for i, g in enumerate(groups, 1)]
        writer.write(args.out, files)
    except ModelError as exc:
        raise CommandError(str(exc)) from None
    rows = [(name, g.chain, g.shape, len(g.uses))
            for (name, _), g in zip(files, groups, strict=True)]
    print(table.format_report(model.name, rows, [(s.op, s.reason) for s in skipped]))
    print(f"wrote {len(files)} case files to {args.out}: pytest --xtc-target=host "
          f"--xtc-cases={args.out} --xtc-only-cases")
    return 0


def main(args: argparse.Namespace) -> int:
    try:
        return run(args)
    except CommandError as exc:
        print(f"xtc-conformance: {exc}", file=sys.stderr)
        return exc.code
