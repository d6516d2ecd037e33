"""Writing imported layers as case files: one file per distinct layer (the same graph, the
same dtype) with the ONNX nodes of every use, checked by the suite's own case-file reader,
all written into a new folder that takes the place of ``--out`` only when complete."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pytest_xtc.core.cases import case as cases
from pytest_xtc.core.cases.casefile import CaseFileError
from pytest_xtc.importer.layer import Layer
from pytest_xtc.importer.model import ModelError


@dataclass
class Distinct:
    """A distinct layer and every use of it in the model."""

    first: Layer
    uses: list[Layer] = field(default_factory=list)

    @property
    def chain(self) -> str:
        return "+".join(self.first.onnx_ops)

    @property
    def shape(self) -> str:
        """The case inputs' shapes, e.g. ``1x56x56x64, 3x3x64x64``."""
        return ", ".join("x".join(map(str, e["expr"]["type"]["shape"]))
                         for e in self.first.graph["inputs"])


def distinct(layers: list[Layer]) -> list[Distinct]:
    """The layers grouped by graph (names aside), in the order of first use."""
    found: dict[str, Distinct] = {}
    for layer in layers:
        key = yaml.safe_dump({"graph": {k: v for k, v in layer.graph.items() if k != "name"},
                              "layouts": layer.layouts, "omitted": layer.omitted},
                             sort_keys=True)
        found.setdefault(key, Distinct(layer)).uses.append(layer)
    return list(found.values())


def case_file(model: str, index: int, group: Distinct) -> tuple[str, dict[str, Any]]:
    """The file name and the case-file data of one distinct layer; an epilogue left out is
    named in both (``01_conv2d_relu_without_bias``) and in ``source.omitted``."""
    ops = "_".join(group.first.xtc_ops)
    parts = group.first.omitted_parts
    stem = f"{index:02d}_{ops}" + (f"_without_{'_'.join(parts)}" if parts else "")
    data = dict(group.first.graph)
    data["name"] = f"{model}_{stem}"
    data["source"] = {
        "model": model,
        "count": len(group.uses),
        "layers": [{"nodes": list(layer.nodes), "tensors": dict(layer.tensors)}
                   for layer in group.uses],
    }
    if group.first.layouts:
        data["source"]["layouts"] = dict(group.first.layouts)
    if group.first.omitted:
        data["source"]["omitted"] = group.first.omitted
    return f"{stem}.yaml", data


def write(out: Path, files: list[tuple[str, dict[str, Any]]]) -> list[int]:
    """The case files written into ``out`` (a new or empty folder), all or none: into a
    temporary folder beside it, each read back by the suite's reader, then renamed. A
    name may hold one subfolder (``model/01_matmul.yaml``). Returns the bytes each file's
    largest case needs (the budget is the reader's, at test time: not checked here)."""
    out = out.absolute()
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ModelError(f"--out {out}: exists and is not an empty folder; give a new one")
    parent = out.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=parent))
        mask = os.umask(0o022)
        os.umask(mask)
        work.chmod(0o777 & ~mask)
    except OSError as exc:
        raise ModelError(f"--out {out}: cannot create it: {exc.strerror or exc}") from None
    needed = []
    try:
        for name, data in files:
            (work / name).parent.mkdir(exist_ok=True)
            (work / name).write_text(yaml.safe_dump(data, sort_keys=False))
            read = cases.load_case_file(work / name, max_case_bytes=sys.maxsize)
            needed.append(max(cases.case_bytes(c) for c in read))
        if out.exists():
            out.rmdir()
        os.replace(work, out)
    except (OSError, CaseFileError) as exc:
        shutil.rmtree(work, ignore_errors=True)  # named as it would have been: work is gone
        message = str(exc).replace(str(work), str(out))
        raise ModelError(f"--out {out}: {message}") from None
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return needed
