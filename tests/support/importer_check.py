"""The importer's cross-check: each imported layer's ONNX nodes run by ONNX's own
reference implementation and its case by the suite's float64 reference, on the same inputs
(layouts converted as the case file says), equal within the case's error bound."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import yaml
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from pytest_xtc.core.cases import graphs
from pytest_xtc.core.judging import reference
from pytest_xtc.importer.model import Model


def _moved(array: np.ndarray, perm: list[int] | None) -> np.ndarray:
    """``array`` transposed by ``perm`` (None: as it is; numpy's default would reverse)."""
    return array if perm is None else np.transpose(array, perm)


def _submodel(model: Any, loaded: Model, names: list[str], feeds: dict[str, np.ndarray],
              output: str) -> Any:
    nodes = [n for n in model.graph.node if (n.name or n.output[0]) in names]
    assert [n.name or n.output[0] for n in nodes] == names, names
    used = {i for n in nodes for i in n.input}
    inits = [t for t in model.graph.initializer if t.name in used and t.name not in feeds]
    inputs = [helper.make_tensor_value_info(k, TensorProto.FLOAT, v.shape)
              for k, v in feeds.items()]
    out = helper.make_tensor_value_info(output, TensorProto.FLOAT, loaded.shape(output))
    graph = helper.make_graph(nodes, "layer", inputs, [out], inits)
    return helper.make_model(graph, opset_imports=list(model.opset_import))


def mismatches(model_path: Path, loaded: Model, case_path: Path, seed: int = 0) -> list[str]:
    """Every use of the case's layer checked; the problems found (none: all agree)."""
    data = yaml.safe_load(case_path.read_text())
    source = data["source"]
    layouts = source.get("layouts", {})
    model = onnx.load(str(model_path))
    ins = graphs.inputs(data)
    (out,) = graphs.outputs(data)
    problems = []
    rng = np.random.default_rng(seed)
    for use in source["layers"]:
        tensors = use["tensors"]
        onnx_inputs = {tensors[o.name]: rng.uniform(-1, 1, loaded.shape(tensors[o.name]))
                       .astype(np.float32) for o in ins}
        case_inputs = [_moved(onnx_inputs[tensors[o.name]], layouts.get(o.name))
                       .reshape(o.shape) for o in ins]
        sub = _submodel(model, loaded, use["nodes"], onnx_inputs, tensors[out.name])
        (expected,) = ReferenceEvaluator(sub).run(None, onnx_inputs)
        ref = reference.evaluate(data, case_inputs)
        shape = expected.shape
        value = _moved(ref.values[0], layouts.get(out.name)).reshape(shape)
        bound = _moved(ref.bounds[0], layouts.get(out.name)).reshape(shape)
        excess = np.abs(expected.astype(np.float64) - value) - bound
        if excess.max() > 0:
            problems.append(f"{case_path.name} {use['nodes']}: ONNX and the case differ by "
                            f"{excess.max():.3g} beyond the bound")
    return problems
