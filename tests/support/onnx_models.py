"""ONNX models built with ``onnx.helper`` for the importer's tests (random weights):
ResNet-18 as exported before batch norm is folded (Conv -> BatchNormalization -> Relu,
residual Add, MaxPool, GlobalAveragePool, Gemm with bias), a BERT-base encoder (12 layers,
hidden 768, 12 heads, FFN 3072; the 12 layers share one set of weights to keep the file
at 28 MB), and a small model of every chain and refusal."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


class Net:
    """Nodes and initializers added one by one, each node named."""

    def __init__(self, seed: int = 0) -> None:
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self.rng = np.random.default_rng(seed)
        self.count = 0

    def weight(self, name: str, shape: tuple[int, ...]) -> str:
        if not any(t.name == name for t in self.inits):
            data = self.rng.standard_normal(shape).astype(np.float32) * 0.05
            self.inits.append(numpy_helper.from_array(data, name))
        return name

    def const(self, name: str, values: list[int] | np.ndarray) -> str:
        if not any(t.name == name for t in self.inits):
            self.inits.append(numpy_helper.from_array(np.asarray(values), name))
        return name

    def op(self, op: str, inputs: list[str], name: str, **attrs: Any) -> str:
        out = f"{name}_out"
        self.nodes.append(helper.make_node(op, inputs, [out], name=name, **attrs))
        return out

    def model(self, name: str, inputs: list[Any], out: str, out_shape: list[Any],
              opset: int = OPSET) -> Any:
        output = helper.make_tensor_value_info(out, TensorProto.FLOAT, out_shape)
        graph = helper.make_graph(self.nodes, name, inputs, [output], self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        onnx.checker.check_model(model)
        return model


def _conv_bn(net: Net, x: str, name: str, cin: int, cout: int, k: int, stride: int,
             relu: bool) -> str:
    w = net.weight(f"{name}.weight", (cout, cin, k, k))
    y = net.op("Conv", [x, w], name, kernel_shape=[k, k], strides=[stride, stride],
               pads=[k // 2] * 4)
    bn = [net.weight(f"{name}.bn.{p}", (cout,)) for p in ("scale", "bias", "mean")]
    var = net.const(f"{name}.bn.var", np.ones(cout, np.float32))
    y = net.op("BatchNormalization", [y, *bn, var], f"{name}.bn")
    return net.op("Relu", [y], f"{name}.relu") if relu else y


def resnet18() -> Any:
    net = Net()
    x = _conv_bn(net, "input", "conv1", 3, 64, 7, 2, relu=True)
    x = net.op("MaxPool", [x], "maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4)
    cin = 64
    for stage, cout in enumerate((64, 128, 256, 512), 1):
        for block in range(2):
            stride = 2 if stage > 1 and block == 0 else 1
            base = f"layer{stage}.{block}"
            y = _conv_bn(net, x, f"{base}.conv1", cin, cout, 3, stride, relu=True)
            y = _conv_bn(net, y, f"{base}.conv2", cout, cout, 3, 1, relu=False)
            if stride != 1 or cin != cout:
                x = _conv_bn(net, x, f"{base}.downsample", cin, cout, 1, stride, relu=False)
            x = net.op("Relu", [net.op("Add", [y, x], f"{base}.add")], f"{base}.relu")
            cin = cout
    x = net.op("GlobalAveragePool", [x], "avgpool")
    x = net.op("Flatten", [x], "flatten")
    w, b = net.weight("fc.weight", (1000, 512)), net.weight("fc.bias", (1000,))
    x = net.op("Gemm", [x, w, b], "fc", transB=1)
    image = helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, 224, 224])
    return net.model("resnet18", [image], x, ["batch", 1000])


def _encoder_layer(net: Net, x: str, i: int) -> str:
    p = f"layer{i}"

    def dense(h: str, name: str, n_in: int, n_out: int) -> str:
        y = net.op("MatMul", [h, net.weight(f"{name}.weight", (n_in, n_out))], f"{p}.{name}")
        return net.op("Add", [y, net.weight(f"{name}.bias", (n_out,))], f"{p}.{name}.bias")

    heads = net.const("heads_shape", [0, 0, 12, 64])
    q, k, v = (net.op("Transpose", [net.op("Reshape", [dense(x, n, 768, 768), heads],
                                           f"{p}.{n}.split")], f"{p}.{n}.heads",
                      perm=[0, 2, 3, 1] if n == "key" else [0, 2, 1, 3])
               for n in ("query", "key", "value"))
    scores = net.op("MatMul", [q, k], f"{p}.scores")
    scores = net.op("Div", [scores, net.const("sqrt_d", np.array(8.0, np.float32))],
                    f"{p}.scale")
    ctx = net.op("MatMul", [net.op("Softmax", [scores], f"{p}.softmax", axis=-1), v],
                 f"{p}.context")
    ctx = net.op("Transpose", [ctx], f"{p}.context.merge", perm=[0, 2, 1, 3])
    ctx = net.op("Reshape", [ctx, net.const("hidden_shape", [0, 0, 768])], f"{p}.context.flat")
    h = _norm(net, net.op("Add", [dense(ctx, "output", 768, 768), x], f"{p}.residual1"),
              f"{p}.norm1")
    f = dense(h, "ffn1", 768, 3072)
    erf = net.op("Erf", [net.op("Div", [f, net.const("sqrt2", np.array(1.4142135, np.float32))],
                                f"{p}.gelu.div")], f"{p}.gelu.erf")
    erf = net.op("Add", [erf, net.const("one", np.array(1.0, np.float32))], f"{p}.gelu.add")
    f = net.op("Mul", [net.op("Mul", [f, erf], f"{p}.gelu.mul"),
                       net.const("half", np.array(0.5, np.float32))], f"{p}.gelu.half")
    f = dense(f, "ffn2", 3072, 768)
    return _norm(net, net.op("Add", [f, h], f"{p}.residual2"), f"{p}.norm2")


def _norm(net: Net, x: str, name: str) -> str:
    scale, bias = net.weight("norm.scale", (768,)), net.weight("norm.bias", (768,))
    return net.op("LayerNormalization", [x, scale, bias], name, axis=-1)


def bert_base() -> Any:
    net = Net(1)
    x = "hidden"
    for i in range(12):
        x = _encoder_layer(net, x, i)
    hidden = helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["batch", "seq", 768])
    return net.model("bert_base", [hidden], x, ["batch", "seq", 768])


def chains() -> Any:
    """Every chain and several refusals, in one small model."""
    net = Net(2)
    x = net.op("Pad", ["image", net.const("pads", [0, 0, 1, 2, 0, 0, 2, 1])], "pad")
    x = net.op("Relu", [net.op("Conv", [x, net.weight("w1", (8, 3, 3, 3))], "conv_a")],
               "relu_a")
    x = net.op("Conv", [x, net.weight("w2", (6, 8, 3, 3))], "conv_same", strides=[2, 2],
               auto_pad="SAME_UPPER")
    net.op("Conv", [x, net.weight("w3", (6, 3, 3, 3))], "conv_grouped", group=2)
    net.op("Conv", [x, net.weight("w4", (4, 6, 3, 3))], "conv_dilated", dilations=[2, 2])
    x = net.op("Flatten", [x], "flatten")  # 1 x 6*5*6
    x = net.op("Relu", [net.op("MatMul", [x, net.weight("m1", (180, 20))], "mm")], "relu_mm")
    x = net.op("Relu", [net.op("Gemm", [x, net.weight("g1", (12, 20))], "gemm_t", transB=1)],
               "relu_gemm")
    x = net.op("Gemm", [x, net.weight("g2", (12, 12))], "gemm_alpha", alpha=2.0)
    x = net.op("Pad", [x, net.const("pads2", [1, 0, 0, 3])], "pad_alone",
               mode="constant")
    x = net.op("Gemm", [net.weight("gt", (2, 5)), x], "gemm_ta", transA=1)
    image = helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 9, 10])
    return net.model("chains", [image], x, [5, 15])


def save(model: Any, folder: Path, name: str) -> Path:
    path = folder / f"{name}.onnx"
    onnx.save(model, str(path))
    return path


def alexnet(scale: int = 1, size: int = 224, name: str = "alexnet") -> Any:
    """AlexNet as torchvision exports it (every Conv and Gemm with a bias; Relu, MaxPool,
    Flatten, a Gemm head with transB): at ``scale`` 1 and ``size`` 224 its real layer
    shapes; ``scale`` divides the channels and features (a small variant to run)."""
    net = Net(5)
    x, cin = "image", 3
    convs = ((64, 11, 4, 2), (192, 5, 1, 2), (384, 3, 1, 1), (256, 3, 1, 1), (256, 3, 1, 1))
    for i, (cout, k, stride, pad) in enumerate(convs, 1):
        cout //= scale
        w, b = net.weight(f"conv{i}.weight", (cout, cin, k, k)), net.weight(f"conv{i}.bias",
                                                                         (cout,))
        x = net.op("Conv", [x, w, b], f"conv{i}", kernel_shape=[k, k], strides=[stride] * 2,
                   pads=[pad] * 4)
        x = net.op("Relu", [x], f"relu{i}")
        if i in (1, 2, 5):
            x = net.op("MaxPool", [x], f"pool{i}", kernel_shape=[3, 3], strides=[2, 2])
        cin = cout
    x = net.op("Flatten", [x], "flatten")
    side = ((((size + 4 - 11) // 4 + 1 - 3) // 2 + 1 - 3) // 2 + 1 - 3) // 2 + 1
    fcs = (cin * side * side, 4096 // scale, 4096 // scale, 1000 // scale)
    for i, (n_in, n_out) in enumerate(itertools.pairwise(fcs), 6):
        w, b = net.weight(f"fc{i}.weight", (n_out, n_in)), net.weight(f"fc{i}.bias", (n_out,))
        x = net.op("Gemm", [x, w, b], f"fc{i}", transB=1)
        if i < 8:
            x = net.op("Relu", [x], f"relu{i}")
    image = helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, size, size])
    return net.model(name, [image], x, [1, fcs[-1]])


def two_layers(graph_name: str, big: int = 0) -> Any:
    """MatMul + Relu then MatMul, under ``graph_name`` (PyTorch exports are all
    ``torch_jit_export`` or ``main_graph``); ``big``: a last MatMul by an [8, big] weight
    given as a graph input (no bytes in the file: its shape is what the importer reads)."""
    net = Net(6)
    x = net.op("Relu", [net.op("MatMul", ["x", net.weight("w", (16, 8))], "mm")], "relu")
    x = net.op("MatMul", [x, net.weight("w2", (8, 8))], "mm2")
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])]
    if big:
        inputs.append(helper.make_tensor_value_info("w_big", TensorProto.FLOAT, [8, big]))
        return net.model(graph_name, inputs, net.op("MatMul", [x, "w_big"], "big"), [4, big])
    return net.model(graph_name, inputs, x, [4, 8])
