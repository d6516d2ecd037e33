"""``xtc-conformance import MODEL.onnx|FOLDER --out DIR [--dim NAME=VALUE ...] [--name NAME]
[--strict] [--max-case-bytes BYTES]``: the argument parser and the run. ``onnx`` is
imported here, when the command runs, and nowhere else before it: without the ``onnx``
extra the command says which extra to install."""

from __future__ import annotations

import argparse
import re
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_xtc.core.limits import DEFAULT_MAX_CASE_BYTES

EXTRA_HINT = "import needs the onnx package: pip install 'pytest-xtc[onnx]'"
NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,39}")


class CommandError(Exception):
    """A one-line problem: the command prints it and exits 3, bad input (2 for a usage
    error; :mod:`pytest_xtc.exit_status`)."""

    def __init__(self, message: str, code: int = 3) -> None:
        super().__init__(message)
        self.code = code


def _bytes(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return int(text)


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser("import", help="an ONNX model's layers as case files (needs "
                            "the onnx extra)")
    parser.add_argument("model", type=Path, metavar="MODEL.onnx|FOLDER",
                        help="a model, or a folder of models (*.onnx: one table each, "
                        "their cases in one subfolder each)")
    parser.add_argument("--out", required=True, type=Path, metavar="DIR",
                        help="folder for the case files (new or empty)")
    parser.add_argument("--dim", action="append", default=[], metavar="NAME=VALUE",
                        help="size of a symbolic dimension; repeatable")
    parser.add_argument("--name", metavar="NAME",
                        help="the cases' name prefix (default: the model file's stem)")
    parser.add_argument("--strict", action="store_true",
                        help="refuse a Conv or Gemm whose bias or scaling XTC cannot "
                        "express, rather than import it without them")
    parser.add_argument("--max-case-bytes", type=_bytes, default=DEFAULT_MAX_CASE_BYTES,
                        metavar="BYTES", help="mark the layers over this budget, as pytest's "
                        f"--xtc-max-case-bytes (default {DEFAULT_MAX_CASE_BYTES}, 1 GiB)")


def dims(pairs: Sequence[str]) -> dict[str, int]:
    found: dict[str, int] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name or not value.isdigit() or int(value) < 1:
            raise CommandError(f"--dim {pair}: expected NAME=VALUE with VALUE an integer "
                               "above 0", 2)
        found[name] = int(value)
    return found


@dataclass
class Imported:
    """One model's import: its case files (name, data), table rows and skipped nodes."""

    name: str
    files: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    rows: list[list[Any]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _models(path: Path, name: str | None) -> list[Path]:
    if not path.is_dir():
        return [path]
    found = sorted(path.glob("*.onnx"))  # each read as a model: a FIFO is refused, by name
    if not found:
        raise CommandError(f"{path}: a folder with no *.onnx model; give a model or a "
                           "folder of them")
    if name is not None and len(found) > 1:
        raise CommandError("--name names one model; a folder's cases are named after each "
                           "model's file", 2)
    return found


def _unique(names: list[str]) -> list[str]:
    """``names`` made unique (``a-b.onnx`` and ``a_b.onnx`` both give ``a_b``)."""
    seen: set[str] = set()
    found = []
    for name in names:
        unique, n = name, 1
        while unique in seen:
            n += 1
            unique = f"{name}_{n}"
        seen.add(unique)
        found.append(unique)
    return found


def _one(path: Path, args: argparse.Namespace, sizes: dict[str, int], prefix: str,
         name: str | None) -> Imported:
    """One model imported as ``name`` (None: its stem); ``prefix``: its subfolder in a
    folder's import."""
    from pytest_xtc.importer import chains, writer
    from pytest_xtc.importer.model import ModelError, load

    model = load(path, sizes, name, other_dims=bool(prefix))
    layers, skipped = chains.translate(model, args.strict)
    if not layers:
        reasons = "; ".join(sorted({f"{s.op}: {s.reason}" for s in skipped})[:4])
        raise ModelError(f"{path}: no node XTC can express ({len(skipped)} nodes "
                         f"not imported: {reasons or 'the graph is empty'})")
    found = Imported(model.name, skipped=[(s.op, s.reason) for s in skipped],
                     notes=list(model.notes))
    for index, group in enumerate(writer.distinct(layers), 1):
        name, data = writer.case_file(model.name, index, group)
        found.files.append((prefix + name, data))
        chain = "; ".join(filter(None, [group.chain, group.first.omitted]))
        found.rows.append([prefix + name, chain, group.shape, len(group.uses)])
    return found


def run(args: argparse.Namespace) -> int:
    """Import the model (or every model of a folder); print the tables; 0 when every
    model had a layer imported."""
    sizes = dims(args.dim)
    if args.name is not None and not NAME.fullmatch(args.name):
        raise CommandError(f"--name {args.name}: expected a letter then letters, digits or "
                           "_ (40 at most)", 2)
    try:
        import onnx  # noqa: F401  (the optional extra)
    except ImportError:
        raise CommandError(EXTRA_HINT, 2) from None
    from pytest_xtc.importer import table, writer
    from pytest_xtc.importer.model import ModelError, case_prefix

    paths = _models(args.model, args.name)
    zoo = args.model.is_dir()
    done: list[Imported] = []
    failed: list[str] = []
    for path, name in zip(paths, _unique([case_prefix(p.stem) for p in paths]), strict=True):
        prefix = f"{name}/" if zoo else ""
        try:
            done.append(_one(path, args, sizes, prefix, name if zoo else args.name))
        except ModelError as exc:
            if not zoo:
                raise CommandError(str(exc)) from None
            failed.append(str(exc))
    if not done:
        raise CommandError("; ".join(failed))
    files = [f for one in done for f in one.files]
    try:
        needed = iter(writer.write(args.out, files))
    except ModelError as exc:
        raise CommandError(str(exc)) from None
    over = 0
    budget = args.max_case_bytes
    for one in done:
        for row in one.rows:
            need = next(needed)
            if need > budget:
                over += 1
                row[1] += (f"; over the budget: needs {need / 2**20:,.0f} MiB of "
                           f"{budget / 2**20:,.0f} MiB, pytest skips it")
        print(table.format_report(one.name, [tuple(r) for r in one.rows], one.skipped))
        for note in one.notes:
            print(f"note: {note}")
    if zoo:
        print(_total(done, failed, over))
    for problem in failed:
        print(f"xtc-conformance: {problem}", file=sys.stderr)
    line = ["pytest", "--xtc-target=host", f"--xtc-cases={args.out}", "--xtc-only-cases"]
    line += [] if budget == DEFAULT_MAX_CASE_BYTES else [f"--xtc-max-case-bytes={budget}"]
    print(f"wrote {len(files)} case files to {args.out}: {shlex.join(line)}"
          + (f" ({over} over the budget: skipped)" if over else ""))
    return 3 if failed else 0  # bad input: some models could not be read


def _total(done: list[Imported], failed: list[str], over: int) -> str:
    layers = sum(r[3] for one in done for r in one.rows)
    files = sum(len(one.files) for one in done)
    skipped = sum(len(one.skipped) for one in done)
    text = (f"total: {len(done)} models, {layers} layers imported as {files} case files "
            f"({over} over the budget), {skipped} nodes not imported")
    return text + (f"; {len(failed)} models not read (below)" if failed else "")


def main(args: argparse.Namespace) -> int:
    try:
        return run(args)
    except CommandError as exc:
        print(f"xtc-conformance: {exc}", file=sys.stderr)
        return exc.code
