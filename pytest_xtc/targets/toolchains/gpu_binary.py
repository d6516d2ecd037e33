"""Checking an nvgpu artifact: the compiled module holds a ``gpu.binary`` with a cubin for
the arch, its host code launches it, and the shared library ships it."""

from __future__ import annotations

import re
import struct
from pathlib import Path
from typing import Any

from pytest_xtc.core.execution import placement

LOWERED_IR = "temps/kernel.llvm.mlir"  # XTC's save_temps copy of the NVVM-lowered module
EM_CUDA = 190  # ELF machine of a cubin
FATBIN_MAGIC = 0xBA55ED50


def check_gpu_binary(directory: Path, arch: str) -> None:
    """Raise AssertionError unless the compiled module holds a GPU binary for ``arch`` that
    its host code launches, and the shared library ships it."""
    lowered = directory / LOWERED_IR
    library = directory / "kernel.so"
    for path in (lowered, library):
        if not path.is_file():
            raise AssertionError(f"no {path.name} in {directory}")
    binaries, launched = placement.with_module(lowered.read_text(), gpu_objects)
    if not binaries:
        raise AssertionError(f"{lowered.name}: no gpu.binary, XTC produced host code only")
    shipped = library.read_bytes()
    for name, objects in binaries.items():
        if name not in launched:
            raise AssertionError(f"gpu.binary @{name} is never launched (gpu.launch_func)")
        for target, blob in objects:
            chip = re.search(r'chip = "([^"]+)"', target)
            if not target.startswith("#nvvm.target") or chip is None or chip[1] != arch:
                raise AssertionError(f"gpu.binary @{name} targets {target}, not {arch}")
            archs = cubin_archs(blob)
            if arch not in archs:
                raise AssertionError(f"gpu.binary @{name} holds no {arch} cubin "
                                     f"(found: {', '.join(archs) or 'none'})")
            if blob not in shipped:
                raise AssertionError(f"{library.name} does not contain gpu.binary @{name}")


def gpu_objects(module: Any) -> tuple[dict[str, list[tuple[str, bytes]]], set[str]]:
    """Per gpu.binary its (target, bytes) objects, and the binaries gpu.launch_func names."""
    from mlir.dialects.gpu import ObjectAttr
    from mlir.ir import StringAttr, SymbolRefAttr

    binaries: dict[str, list[tuple[str, bytes]]] = {}
    launched: set[str] = set()
    for op in placement.walk(module):
        if op.name == "gpu.binary":
            name = StringAttr(op.attributes["sym_name"]).value
            objects = [ObjectAttr(o) for o in op.attributes["objects"]]
            binaries[name] = [(str(o.target), bytes(o.object)) for o in objects]
        elif op.name == "gpu.launch_func":
            launched.add(SymbolRefAttr(op.attributes["kernel"]).value[0])
    return binaries, launched


def cubin_archs(blob: bytes) -> list[str]:
    """The ``sm_XX`` of the CUDA ELF images in a fatbin, or of a bare cubin."""
    if blob[:4] == b"\x7fELF":
        return [f"sm_{_cubin_sm(blob)}"] if _elf_machine(blob) == EM_CUDA else []
    if len(blob) < 16 or struct.unpack_from("<I", blob)[0] != FATBIN_MAGIC:
        return []
    header_size, fat_size = struct.unpack_from("<HQ", blob, 6)
    archs, offset, end = [], header_size, min(len(blob), header_size + fat_size)
    while offset + 0x20 <= end:
        kind, _, entry_header, payload = struct.unpack_from("<HHIQ", blob, offset)
        sm = struct.unpack_from("<I", blob, offset + 0x1C)[0]
        if kind == 2:  # an ELF image, as opposed to PTX text
            archs.append(f"sm_{sm}")
        if entry_header == 0:
            break
        offset += entry_header + payload
    return archs


def _elf_machine(blob: bytes) -> int:
    return struct.unpack_from("<H", blob, 18)[0]


def _cubin_sm(blob: bytes) -> int:
    return (struct.unpack_from("<I", blob, 48)[0] >> 8) & 0xFF  # e_flags of a 64-bit ELF
