"""Regenerate the real-model case files: ``python make_cases.py`` (needs xtc-tools).

Each layer is built with XTC's own graph API and written with ``graph.dump``, then the
case-file keys are appended (schedules, dtypes, values, error_rule). ``ci/``: reduced
sizes a CI tier affords; ``large/``: the layers at their real sizes (benchmarks/model_cases.py).
One node is scheduled per schedule (the graph's last, or the one ``node`` names).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).parent

MATMUL_SCHEDULES: dict[str, Any] = {
    "none": [],
    "tile": [{"tile": ["i", {"i1": 4}]}, {"tile": ["j", {"j1": 16}]}],
    "tile+interchange": [{"tile": ["j", {"j1": 16}]}, {"interchange": [["i", "k", "j", "j1"]]}],
    "vectorize": [{"tile": ["j", {"j1": 8}]}, {"interchange": [["i", "k", "j", "j1"]]},
                  {"vectorize": [["j1"]]}],
    "parallelize": [{"tile": ["j", {"j1": 16}]}, {"parallelize": [["j"]]}],
}
CONV_SCHEDULES: dict[str, Any] = {
    "none": [],
    "tile": [{"tile": ["f", {"f1": 4}]}],
    "tile+interchange": [{"tile": ["f", {"f1": 4}]},
                         {"interchange": [["b", "h", "w", "f", "r", "s", "c", "f1"]]}],
    "parallelize": [{"parallelize": [["h"]]}],
}


def matmul(name: str, i: int, k: int, j: int, relu: bool = False) -> Any:
    import xtc.graphs.xtc.op as O

    a = O.tensor((i, k), "float32", name="A")
    b = O.tensor((k, j), "float32", name="B")
    with O.graph(name=name) as gb:
        c = O.matmul(a, b, name="C")
        if relu:
            O.relu(c, name="R")
    return gb.graph


def conv(name: str, n: int, hw: int, c: int, rs: int, f: int, stride: int = 1, pad: int = 0,
         relu: bool = False) -> Any:
    import xtc.graphs.xtc.op as O

    x = O.tensor((n, hw, hw, c), "float32", name="X")
    w = O.tensor((rs, rs, c, f), "float32", name="W")
    with O.graph(name=name) as gb:
        inp = O.pad2d(x, name="P", padding={1: (pad, pad), 2: (pad, pad)},
                      constant_value=0) if pad else x
        out = O.conv2d(inp, w, name="O", stride=(stride, stride))
        if relu:
            O.relu(out, name="R")
    return gb.graph


def write(folder: str, graph: Any, schedules: dict[str, Any], node: str | None = None,
          values: list[str] | None = None) -> None:
    path = HERE / folder / f"{graph.name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    graph.dump(path)
    extra: dict[str, Any] = {"schedules": schedules, "dtypes": ["float32"],
                             "values": values or ["random"], "error_rule": {"c": 1.0}}
    if node is not None:
        extra["schedule_node"] = node
    with path.open("a") as out:
        out.write(yaml.safe_dump(extra, sort_keys=False, width=100))


def main() -> None:
    mm, cv = MATMUL_SCHEDULES, CONV_SCHEDULES
    # ci/: seconds each on 2 cores, one or two schedules a layer
    write("ci", matmul("gpt2_attn_qkv_s16", 16, 768, 2304), {"tile": mm["tile"]})
    write("ci", matmul("gpt2_mlp_fc_relu_s16", 16, 768, 3072, relu=True),
          {"parallelize": mm["parallelize"]}, node="C")
    write("ci", matmul("odd_prime_97x89x83", 97, 83, 89),
          {"none": [], "vectorize": mm["vectorize"]}, values=["random", "special"])
    write("ci", conv("mobilenetv2_pw_expand_14", 1, 14, 32, 1, 192), {"tile": cv["tile"]})
    write("ci", conv("vgg16_conv3_3_28", 1, 28, 64, 3, 64, pad=1, relu=True),
          {"tile": cv["tile"]}, node="O")
    write("ci", conv("lenet_conv1_relu", 1, 32, 1, 5, 6, relu=True), {"none": []})
    write("ci", conv("resnet_stem_56", 1, 56, 3, 7, 16, stride=2, pad=3, relu=True),
          {"none": []})
    write("ci", conv("resnet_downsample_1x1_s2", 1, 28, 64, 1, 128, stride=2),
          {"parallelize": cv["parallelize"]})
    # large/: real sizes
    for name, i, k, j in (("llama7b_decode_qkv", 1, 4096, 4096),
                          ("llama7b_decode_up", 4, 4096, 11008),
                          ("llama7b_decode_down", 1, 11008, 4096),
                          ("llama7b_prefill_qkv", 128, 4096, 4096),
                          ("gpt2_attn_qkv_s64", 64, 768, 2304),
                          ("gpt2_mlp_fc_s64", 64, 768, 3072)):
        write("large", matmul(name, i, k, j), {"none": [], "parallelize": mm["parallelize"]})
    write("large", conv("vgg16_conv3_3_224", 1, 224, 64, 3, 64, pad=1, relu=True),
          {"none": []}, node="O")
    write("large", conv("resnet50_stem_224", 1, 224, 3, 7, 64, stride=2, pad=3, relu=True),
          {"none": []}, node="O")
    write("large", conv("mobilenetv2_pw_expand_56", 1, 56, 24, 1, 144), {"none": []})


if __name__ == "__main__":
    main()
