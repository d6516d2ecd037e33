"""Constant folding of what an ONNX model fixes before it runs: initializers, ``Constant``
nodes (``value``, ``value_float(s)``, ``value_int(s)``), ``Shape`` and ``Size`` of a tensor
whose shape ONNX's shape inference knows, and any deterministic node of small constant
inputs (Gather, Concat, Cast, Slice, arithmetic...), evaluated by ONNX's own reference
implementation. What stays unknown is said truly: given at run time as a graph input,
computed at run time from one, or a node the importer does not evaluate."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from onnx import helper, numpy_helper

# ``model``: a :class:`pytest_xtc.importer.model.Model`, which calls this module as it
# loads (so no import of it here: no circle).
Model = Any
ONNX_DOMAINS = ("", "ai.onnx")


def attributes(node: Any) -> dict[str, Any]:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}

ROUNDS = 4  # fold, infer shapes again, fold what they make known...
MAX_FOLDED = 1 << 16  # elements of a folded value: shapes, pads, axes; never weights
NOT_EVALUATED = ("RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike",
                 "Multinomial", "Bernoulli", "If", "Loop", "Scan", "SequenceMap")
CONSTANT_FORMS = {"value_float": np.float32, "value_floats": np.float32,
                  "value_int": np.int64, "value_ints": np.int64}


Shapes = tuple[dict[str, tuple[int, ...] | None], dict[str, int]]


def fold_all(model: Model, proto: Any, infer: Callable[[Any], Shapes]) -> None:
    """Fold, then infer shapes again with the folded values as initializers (what ONNX's
    own data propagation did not follow, e.g. a Div of a Shape), while that tells more."""
    for _ in range(ROUNDS):
        if not fold(model) or not _unknown_after_folded(model):
            return
        try:
            found, elem_types = infer(_with_folded(proto, model))
        except ValueError as exc:  # ModelError: what folding gave ONNX refuses
            model.notes.append(f"shape inference after constant folding failed, the shapes "
                               f"known before kept: {exc}")
            return
        learned = {k: v for k, v in found.items() if v is not None and
                   model.shapes.get(k) is None}
        if not learned:
            return
        model.shapes.update(learned)
        model.elem_types.update({k: elem_types[k] for k in learned if k in elem_types})


def fold(model: Model) -> int:
    """Every node whose outputs are constants, in model order, folded into
    ``model.constants`` and listed in ``model.folded``; how many were new."""
    count = 0
    for node in model.nodes:
        if node.domain not in ONNX_DOMAINS or id(node) in model.folded:
            continue
        values = _constant_node(node) if node.op_type == "Constant" else _evaluated(node, model)
        if values is None:
            continue
        model.constants.update(zip(node.output, values, strict=False))
        model.folded.add(id(node))
        count += 1
    return count


def _unknown_after_folded(model: Model) -> bool:
    """Whether a node reading a folded value has an output of unknown shape."""
    return any(model.shapes.get(out) is None
               for name in model.constants for user in model.consumers.get(name, [])
               if id(user) not in model.folded for out in user.output if out)


def _with_folded(proto: Any, model: Model) -> Any:
    """A light copy of ``proto`` for shape inference: folded nodes replaced by their values
    as initializers; large initializers as typed graph inputs (their shapes, no bytes)."""
    graph = proto.graph
    small = [t for t in graph.initializer if math.prod(t.dims) <= MAX_FOLDED]
    large = [helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
             for t in graph.initializer if math.prod(t.dims) > MAX_FOLDED]
    kept = [n for n in model.nodes if id(n) not in model.folded]
    names = {o for n in model.nodes if id(n) in model.folded for o in n.output}
    folded = {n: model.constants[n] for n in names if n in model.constants}
    values = [numpy_helper.from_array(v, n) for n, v in folded.items() if v.size <= MAX_FOLDED]
    large += [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype),
                                            list(v.shape))
              for n, v in folded.items() if v.size > MAX_FOLDED]  # a Constant node's weight
    inputs = [i for i in graph.input if i.name not in {t.name for t in graph.initializer}]
    light = helper.make_graph(kept, graph.name, inputs + large, list(graph.output),
                              small + values)
    copy = helper.make_model(light, opset_imports=list(proto.opset_import))
    copy.ir_version = proto.ir_version
    return copy


def _constant_node(node: Any) -> list[np.ndarray] | None:
    attrs = attributes(node)
    if "value" in attrs:
        return [numpy_helper.to_array(attrs["value"])]
    for name, dtype in CONSTANT_FORMS.items():
        if name in attrs:
            return [np.asarray(attrs[name], dtype=dtype)]
    return None  # strings or a sparse value: nothing the importer reads


def _evaluated(node: Any, model: Model) -> list[np.ndarray] | None:
    if node.op_type in NOT_EVALUATED or any(a.type in (5, 10) for a in node.attribute):
        return None  # random, or a node with subgraphs (GRAPH, GRAPHS)
    if node.op_type in ("Shape", "Size"):
        return _shape_of(node, model)
    inputs = [n for n in node.input if n]
    if not inputs or any(n not in model.constants and n not in model.initializers
                         for n in inputs):
        return None
    for name in [*inputs, *(o for o in node.output if o)]:  # sizes known before any read
        shape = model.shapes.get(name)
        if shape is None or math.prod(shape) > MAX_FOLDED:
            return None
    feeds = {n: model.constant(n) for n in inputs}
    if any(v is None or v.size > MAX_FOLDED for v in feeds.values()):
        return None
    return _run(node, model, feeds)


def _shape_of(node: Any, model: Model) -> list[np.ndarray] | None:
    shape = model.shapes.get(node.input[0]) if node.input else None
    if shape is None:
        return None
    if node.op_type == "Size":
        return [np.asarray(math.prod(shape), dtype=np.int64)]
    attrs = attributes(node)
    start, end = attrs.get("start", 0), attrs.get("end", len(shape))
    return [np.asarray(shape[start:end], dtype=np.int64)]


def _run(node: Any, model: Model, feeds: dict[str, Any]) -> list[np.ndarray] | None:
    from onnx.reference import ReferenceEvaluator

    inputs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype),
                                            v.shape) for n, v in feeds.items()]
    outputs = [helper.make_empty_tensor_value_info(n) for n in node.output if n]
    graph = helper.make_graph([node], "fold", inputs, outputs)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", model.opset)])
    proto.ir_version = min(proto.ir_version, 8)
    try:
        results = ReferenceEvaluator(proto).run(None, feeds)
    except Exception:
        return None
    return [np.asarray(r) for r in results]


def origin(name: str, model: Model) -> str:
    """Why ``name`` is not a constant, in a few words."""
    if name in model.inputs:
        return f"given at run time as graph input {name!r}"
    seen, todo, found = set(), [name], []
    while todo:
        tensor = todo.pop()
        if tensor in seen:
            continue
        seen.add(tensor)
        if tensor in model.inputs:
            found.append(tensor)
        producer = model.producers.get(tensor)
        if producer is not None:
            todo += [n for n in producer.input if n]
    if found:
        return f"computed at run time from graph input {', '.join(map(repr, sorted(found)))}"
    producer = model.producers.get(name)
    op = producer.op_type if producer is not None else "no"
    return f"computed by a {op} node the importer does not evaluate"
