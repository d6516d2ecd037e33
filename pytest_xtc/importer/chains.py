"""Grouping ONNX nodes into layers: a Conv, MatMul or Gemm with the Relu that alone
consumes its result (conv -> relu, matmul -> relu), a Conv with the constant Pad of H and
W that alone feeds it (pad -> conv), and any other Relu or Pad alone. A Conv or Gemm whose
epilogue (bias, scaling) XTC cannot express is imported without it, saying so (refused
under ``strict``). Nodes folded into constants, and every other node, are listed as not
imported, with every reason."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pytest_xtc.importer import table
from pytest_xtc.importer.layer import Layer, LayerBuilder
from pytest_xtc.importer.model import ONNX_DOMAINS, Model, NotImported
from pytest_xtc.importer.onnx_ops import conv, gemm, matmul, omission, pad, refuse, relu

ANCHORS: dict[str, Any] = {"Conv": conv, "MatMul": matmul, "Gemm": gemm}
XTC_OPS = {"Conv": "conv2d", "MatMul": "matmul", "Gemm": "matmul"}
ALONE: dict[str, Any] = {"Relu": relu, "Pad": pad}
FOLDED = "folded into a constant (computed from constants and known shapes)"


@dataclass(frozen=True)
class Skipped:
    """A node not imported: its op, node name and why."""

    op: str
    node: str
    reason: str


@dataclass
class Chain:
    anchor: Any
    pre: tuple[Any, dict[int, list[int]], float] | None = None  # Pad node, widths, value
    post: Any = None  # Relu node

    @property
    def nodes(self) -> list[Any]:
        return [n for n in (self.pre[0] if self.pre else None, self.anchor, self.post) if n]


def translate(model: Model, strict: bool = False) -> tuple[list[Layer], list[Skipped]]:
    """Every node of the model, as a layer or as a skipped node. ``strict``: a node whose
    epilogue XTC cannot express is refused, not imported without it."""
    chains: dict[int, Chain] = {}
    absorbed: set[int] = set()
    for node in model.nodes:
        if _onnx(node) and node.op_type in ANCHORS and not _problems(node, model, strict):
            chain = Chain(node, _pre(node, model), _post(node, model))
            chains[id(node)] = chain
            absorbed |= {id(n) for n in chain.nodes if n is not node}
    layers: list[Layer] = []
    skipped: list[Skipped] = []
    for node in model.nodes:
        if id(node) in absorbed:
            continue
        if id(node) in model.folded:
            why = table.reason("Constant") if node.op_type == "Constant" else FOLDED
            skipped.append(Skipped(node.op_type, _name(node), why))
            continue
        chain = chains.get(id(node), Chain(node))
        try:
            layers.append(_layer(chain, model, strict))
        except NotImported as exc:
            skipped += [Skipped(n.op_type, _name(n), str(exc)) for n in chain.nodes]
    return layers, skipped


def _onnx(node: Any) -> bool:
    return node.domain in ONNX_DOMAINS


def _name(node: Any) -> str:
    return str(node.name or node.output[0])


def _problems(node: Any, model: Model, strict: bool) -> list[str]:
    """Every reason an anchor is refused (its epilogue's too, when ``strict``)."""
    module = ANCHORS[node.op_type]
    found: list[str] = module.problems(node, model)
    if strict:
        found += [module.STRICT[part] for part in module.epilogue(node, model)]
    return found


def _fits(module: Any, node: Any, model: Model) -> bool:
    try:
        module.check(node, model)
    except NotImported:
        return False
    return True


def _pre(node: Any, model: Model) -> tuple[Any, dict[int, list[int]], float] | None:
    if node.op_type != "Conv":
        return None
    producer = model.producers.get(node.input[0])
    if producer is None or not _onnx(producer) or producer.op_type != "Pad":
        return None
    if model.sole_consumer(producer.output[0]) is not node:
        return None
    try:
        spatial = pad.spatial(producer, model)
    except NotImported:
        return None
    return (producer, *spatial) if spatial else None


def _post(node: Any, model: Model) -> Any:
    consumer = model.sole_consumer(node.output[0])
    if consumer is None or not _onnx(consumer) or consumer.op_type != "Relu":
        return None
    return consumer if _fits(relu, consumer, model) else None


def _layer(chain: Chain, model: Model, strict: bool) -> Layer:
    node = chain.anchor
    if not _onnx(node):
        raise NotImported(f"op of domain {node.domain!r}: no XTC op")
    builder = LayerBuilder(model)
    layout = None
    left_out, parts = "", dict[str, tuple[str, str]]()
    if node.op_type in ANCHORS:
        refuse(_problems(node, model, strict))
        parts = {} if strict else ANCHORS[node.op_type].epilogue(node, model)
        left_out = omission(XTC_OPS[node.op_type], parts) if parts else ""
    if node.op_type == "Conv":
        result = conv.build(builder, node, chain.pre)
        layout = conv.OUTPUT_LAYOUT
    elif node.op_type in ANCHORS:
        result = ANCHORS[node.op_type].build(builder, node)
    elif node.op_type in ALONE:
        ALONE[node.op_type].check(node, model)
        result = ALONE[node.op_type].build(builder, node)
    else:
        raise NotImported(table.reason(node.op_type))
    if chain.post is not None:
        result = relu.build(builder, chain.post, result)
    return builder.finish(result, chain.nodes[-1].output[0], layout, chain.nodes, left_out,
                          sorted(parts) if left_out else ())
