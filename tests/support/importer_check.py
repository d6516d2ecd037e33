"""The importer's cross-check: each imported layer's ONNX nodes run by ONNX's own
reference implementation and its case by the suite's float64 reference, on the same inputs
(layouts converted as the case file says), equal within the case's error bound. A layer
imported without its epilogue (``source.omitted`` names it: bias, alpha) is checked as the
ONNX nodes without what that text names: a Conv without its bias input, a Gemm with
beta 0 or alpha 1. A node input that is neither a case operand nor an initializer (a
Constant node's, a shape computation's) takes the value ONNX's reference gives it in the
whole model."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import yaml
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from pytest_xtc.core.cases import graphs
from pytest_xtc.core.judging import reference
from pytest_xtc.importer.model import Model


def _moved(array: np.ndarray, perm: list[int] | None) -> np.ndarray:
    """``array`` transposed by ``perm`` (None: as it is; numpy's default would reverse)."""
    return array if perm is None else np.transpose(array, perm)


def _without(node: Any, omitted: str, loaded: Model) -> tuple[Any, list[Any]]:
    """``node`` without the epilogue ``omitted`` names, and the zero C it then reads (a
    Gemm's C replaced by zeros: opset 6 requires one, and onnx.reference's opset-6 Gemm
    ignores beta when it does not broadcast)."""
    node = copy.deepcopy(node)
    zeros = []
    if "bias" in omitted and node.op_type == "Conv":
        del node.input[2:]
    if "bias" in omitted and node.op_type == "Gemm":
        name = f"{node.input[2]}.zero"
        zeros.append(numpy_helper.from_array(np.zeros(loaded.shape(node.input[2]),
                                                      np.float32), name))
        node.input[2] = name
    for attr in node.attribute if node.op_type == "Gemm" else []:
        if attr.name == "alpha" and "alpha" in omitted:
            attr.f = 1.0
    return node, zeros


def _computed(model: Any, loaded: Model, names: list[str]) -> dict[str, np.ndarray]:
    """The values of ``names`` in the whole model (random graph inputs)."""
    if not names:
        return {}
    rng = np.random.default_rng(1)
    inits = {t.name for t in model.graph.initializer}
    feeds = {i.name: rng.uniform(-1, 1, loaded.shape(i.name)).astype(np.float32)
             for i in model.graph.input if i.name not in inits}
    return dict(zip(names, ReferenceEvaluator(model).run(names, feeds), strict=True))


def _submodel(model: Any, loaded: Model, names: list[str], feeds: dict[str, np.ndarray],
              output: str, omitted: str) -> Any:
    stripped = [_without(n, omitted, loaded) for n in model.graph.node
                if (n.name or n.output[0]) in names]
    nodes = [n for n, _ in stripped]
    assert [n.name or n.output[0] for n in nodes] == names, names
    made = {o for n in nodes for o in n.output}
    used = {i for n in nodes for i in n.input if i and i not in made}
    inits = [t for t in model.graph.initializer if t.name in used and t.name not in feeds]
    inits += [z for _, zeros in stripped for z in zeros]
    known = {t.name for t in inits} | set(feeds)
    inits += [numpy_helper.from_array(v, k)
              for k, v in _computed(model, loaded, sorted(used - known)).items()]
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
        sub = _submodel(model, loaded, use["nodes"], onnx_inputs, tensors[out.name],
                        source.get("omitted", ""))
        (result,) = ReferenceEvaluator(sub).run(None, onnx_inputs)
        expected = np.asarray(result)
        ref = reference.evaluate(data, case_inputs)
        shape = expected.shape
        value = _moved(ref.values[0], layouts.get(out.name)).reshape(shape)
        bound = _moved(ref.bounds[0], layouts.get(out.name)).reshape(shape)
        excess = np.abs(expected.astype(np.float64) - value) - bound
        if excess.max() > 0:
            problems.append(f"{case_path.name} {use['nodes']}: ONNX and the case differ by "
                            f"{excess.max():.3g} beyond the bound")
    return problems
