"""Reading an ONNX model: refused with one line when it is not a readable, known, complete
model; the symbolic dimensions of its inputs fixed by ``--dim``, every other tensor's shape
(the outputs' too, however an exporter named their dimensions) from ONNX's own shape
inference. Weights in external data files (PyTorch's default export) are read from the
model's folder, wherever the command runs."""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from google.protobuf.message import DecodeError
from onnx import helper, numpy_helper

from pytest_xtc.core.cases.textfile import FileTooLarge, UnreadableFile, one_line, read_bytes

DTYPES: dict[int, str] = {onnx.TensorProto.FLOAT: "float32",
                          onnx.TensorProto.DOUBLE: "float64"}
ONNX_DOMAINS = ("", "ai.onnx")
MAX_MODEL_BYTES = 2 << 30  # protobuf's own limit; larger models keep weights outside


class ModelError(ValueError):
    """A model the importer cannot read at all; the message is one line."""


class NotImported(ValueError):
    """A node XTC's ops cannot express exactly; the message is the reason."""


@dataclass
class Model:
    """A checked model with every tensor's inferred shape (None: unknown)."""

    name: str
    folder: Path
    opset: int
    nodes: list[Any]
    shapes: dict[str, tuple[int, ...] | None]
    elem_types: dict[str, int]
    initializers: dict[str, Any]
    constants: dict[str, np.ndarray] = field(default_factory=dict)  # folded values
    folded: set[int] = field(default_factory=set)  # ids of the nodes folded into constants
    inputs: set[str] = field(default_factory=set)  # graph inputs given at run time
    consumers: dict[str, list[Any]] = field(default_factory=lambda: defaultdict(list))
    producers: dict[str, Any] = field(default_factory=dict)
    outputs: set[str] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)  # what the import could not do, said

    def shape(self, name: str) -> tuple[int, ...]:
        shape = self.shapes.get(name)
        if shape is None:
            raise NotImported(f"shape of {name!r} unknown after ONNX shape inference")
        return shape

    def dtype(self, name: str) -> str:
        elem = self.elem_types.get(name)
        if elem not in DTYPES:
            kind = helper.tensor_dtype_to_np_dtype(elem) if elem else "unknown"
            raise NotImported(f"dtype {kind}: XTC cases are float32 or float64")
        return DTYPES[elem]

    def constant(self, name: str) -> np.ndarray | None:
        """The value of an initializer or of a folded node's output (:mod:`.folding`);
        None otherwise."""
        if name in self.initializers:
            return numpy_helper.to_array(self.initializers[name], base_dir=str(self.folder))
        return self.constants.get(name)

    def sole_consumer(self, name: str) -> Any | None:
        users = self.consumers.get(name, [])
        return users[0] if len(users) == 1 and name not in self.outputs else None


def attributes(node: Any) -> dict[str, Any]:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def load(path: Path, dims: Mapping[str, int], name: str | None = None,
         other_dims: bool = False) -> Model:
    """The model at ``path`` read, checked, shape-inferred and its constants folded;
    ModelError otherwise. ``name``: the cases' prefix (default: the file's stem);
    ``other_dims``: ``dims`` may name dimensions of other models (a folder's)."""
    from pytest_xtc.importer import folding
    proto = _read(path)
    _check_versions(path, proto)
    external = _check_external_data(path, proto)
    try:
        # external data is looked up next to the model only when the checker reads the
        # model from its path (given the proto, it looks in the working directory)
        onnx.checker.check_model(str(path.resolve()) if external else proto)
    except onnx.checker.ValidationError as exc:
        raise ModelError(f"{path}: not a valid ONNX model: {one_line(exc)}") from None
    _fix_dims(path, proto, dims, other_dims)
    model = _model(path, proto, _infer(path, proto), name or case_prefix(path.stem))
    folding.fold_all(model, proto, lambda folded: shapes(_infer(path, folded).graph))
    return model


def _infer(path: Path, proto: Any) -> Any:
    try:
        return onnx.shape_inference.infer_shapes(proto, check_type=True, strict_mode=True,
                                                 data_prop=True)
    except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError) as exc:
        raise ModelError(f"{path}: ONNX shape inference fails: {one_line(exc)}") from None


def shapes(graph: Any) -> tuple[dict[str, tuple[int, ...] | None], dict[str, int]]:
    """Every tensor's shape (None: not fully known) and element type in ``graph``."""
    found: dict[str, tuple[int, ...] | None] = {}
    elem_types: dict[str, int] = {}
    for info in [*graph.input, *graph.output, *graph.value_info]:
        kind = info.type.tensor_type
        elem_types[info.name] = kind.elem_type
        dims = kind.shape.dim if kind.HasField("shape") else None
        known = dims is not None and all(d.HasField("dim_value") for d in dims)
        found[info.name] = tuple(d.dim_value for d in dims) if known and dims is not None \
            else None
    for tensor in graph.initializer:
        found[tensor.name] = tuple(tensor.dims)
        elem_types[tensor.name] = tensor.data_type
    return found, elem_types


#: The longest case-name prefix; a longer name keeps its first letters and a digest.
PREFIX_LENGTH = 40


def case_prefix(text: str) -> str:
    """``text`` as a case-name prefix: letters, digits and underscores, 1 to 40; a longer
    one cut to 33 and ended with 6 hex digits of its SHA-256 (two long names that share
    their first 40 letters stay apart)."""
    found = re.sub(r"[^A-Za-z0-9_]+", "_", text).strip("_") or "model"
    if len(found) <= PREFIX_LENGTH:
        return found
    digest = hashlib.sha256(found.encode()).hexdigest()[:6]
    return f"{found[:PREFIX_LENGTH - 7].rstrip('_')}_{digest}"


def _read(path: Path) -> Any:
    """The model's protobuf, read only from a regular file (a FIFO or a device named
    ``.onnx`` is refused before it is opened for reading: it could block or never end)."""
    try:
        data = read_bytes(path, MAX_MODEL_BYTES)
    except FileTooLarge as exc:
        raise ModelError(f"{path}: {exc.size / 2**30:.1f} GiB is over protobuf's 2 GiB limit; "
                         "save the model with its weights as external data") from None
    except UnreadableFile as exc:
        raise ModelError(f"{path}: {exc}") from None
    try:
        proto = onnx.load_model_from_string(data)
    except DecodeError as exc:
        # An ONNX file opens with field 1 (ir_version, a varint): 0x08 and a small number.
        if data[:1] == b"\x08" and data[1:2] and data[1] < 0x20:
            raise ModelError(f"{path}: truncated or corrupt ONNX file ({one_line(exc)}); "
                             "export or copy it again") from None
        raise ModelError(f"{path}: not an ONNX model (protobuf: {one_line(exc)})") from None
    if not proto.ir_version or not proto.HasField("graph"):
        raise ModelError(f"{path}: not an ONNX model (no IR version or no graph)")
    return proto


def _check_versions(path: Path, proto: Any) -> None:
    if proto.ir_version > onnx.IR_VERSION:
        raise ModelError(f"{path}: IR version {proto.ir_version} is newer than onnx "
                         f"{onnx.__version__} knows ({onnx.IR_VERSION}); upgrade onnx")
    known = onnx.defs.onnx_opset_version()
    for opset in proto.opset_import:
        if opset.domain in ONNX_DOMAINS and opset.version > known:
            raise ModelError(f"{path}: opset {opset.version} is newer than onnx "
                             f"{onnx.__version__} knows (up to {known}); upgrade onnx "
                             "(pip install -U onnx) or export with an older opset")


def _check_external_data(path: Path, proto: Any) -> bool:
    """Every external data file exists inside the model's folder and holds its bytes;
    whether the model has any."""
    folder = path.resolve().parent
    external = False
    for tensor in _tensors(proto.graph):
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            continue
        external = True
        info = {e.key: e.value for e in tensor.external_data}
        where = (folder / info.get("location", "")).resolve()
        if not where.is_relative_to(folder) or where == folder:
            raise ModelError(f"{path}: tensor {tensor.name!r}: external data location "
                             f"{info.get('location')!r} is not a file in the model's folder")
        if not where.is_file():
            raise ModelError(f"{path}: external data {info['location']} (tensor "
                             f"{tensor.name!r}) not found; put it next to the model")
        end = int(info.get("offset", 0)) + int(info.get("length", 0))
        if end > where.stat().st_size:
            raise ModelError(f"{path}: external data {info['location']} is shorter than "
                             f"tensor {tensor.name!r} needs ({end} bytes); copy it again")
    return external


def _tensors(graph: Any) -> list[Any]:
    """The graph's tensors: initializers and node attributes, subgraphs included."""
    found = list(graph.initializer)
    for node in graph.node:
        for attr in node.attribute:
            found += ([attr.t] if attr.HasField("t") else []) + list(attr.tensors)
            for sub in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                found += _tensors(sub)
    return found


def _symbolic(infos: Any) -> set[str]:
    return {d.dim_param for v in infos for d in v.type.tensor_type.shape.dim
            if d.HasField("dim_param")}


def _fix_dims(path: Path, proto: Any, dims: Mapping[str, int], other_dims: bool) -> None:
    """Symbolic dimensions replaced by ``dims``; ModelError naming those of the graph's
    inputs left open. Other symbolic dimensions without a size (an output's
    ``Relu_out_dim_0``, as TorchScript exports name them) are left to shape inference."""
    graph = proto.graph
    weights = {t.name for t in graph.initializer}
    given = [i for i in graph.input if i.name not in weights]
    infos = [*graph.input, *graph.output, *graph.value_info]
    symbolic = _symbolic(infos)
    unknown = sorted(set(dims) - symbolic)
    if unknown and not other_dims:
        named = ", ".join(sorted(symbolic)) or "none"
        raise ModelError(f"{path}: --dim {unknown[0]}: the model has no dimension of that "
                         f"name (its symbolic dimensions: {named})")
    missing = sorted(_symbolic(given) - set(dims))
    if missing:
        how = " ".join(f"--dim {name}=N" for name in missing)
        raise ModelError(f"{path}: symbolic dimensions without a size: {', '.join(missing)}; "
                         f"give them: {how}")
    for info in infos:
        for dim in info.type.tensor_type.shape.dim:
            if dim.HasField("dim_param"):
                if dim.dim_param in dims:
                    dim.dim_value = dims[dim.dim_param]
                else:
                    dim.ClearField("dim_param")  # inferred from the inputs


def _model(path: Path, proto: Any, inferred: Any, name: str) -> Model:
    graph = inferred.graph
    known, elem_types = shapes(graph)
    initializers = {t.name: t for t in graph.initializer}
    opset = next((o.version for o in proto.opset_import if o.domain in ONNX_DOMAINS), 0)
    model = Model(name, path.resolve().parent, opset, list(graph.node), known, elem_types,
                  initializers, outputs={o.name for o in graph.output},
                  inputs={i.name for i in graph.input} - set(initializers))
    for node in graph.node:
        for name_in in node.input:
            if name_in:
                model.consumers[name_in].append(node)
        for name_out in node.output:
            model.producers[name_out] = node
    return model
