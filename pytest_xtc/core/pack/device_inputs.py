"""Input sets for the device runner (device_case.py loads this file beside it): made
again from a pack's recipe, bit for bit, as ``Case.make_inputs`` makes them
(core/cases/case.py, core/cases/values.py), and checked by their digests. Python 3 and
numpy only."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np

Json = dict[str, Any]


def input_digest(arrays: list[np.ndarray]) -> str:
    """SHA-256 of an input set: each array's dtype, shape and bytes."""
    digest = hashlib.sha256()
    for array in arrays:
        digest.update(f"{array.dtype.name}\0{tuple(array.shape)!r}\0".encode())
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


def specials(dtype: str) -> np.ndarray:
    """core/cases/values.py's special values, in ``dtype``."""
    info = np.finfo(dtype)
    tiny, big = info.smallest_subnormal, np.ldexp(1.0, int(info.maxexp) // 2)
    values = [np.nan, np.inf, -np.inf, -0.0, 0.0, tiny, -tiny, info.tiny * 0.375,
              -info.tiny * 0.625, info.tiny, -info.tiny, big, -big, info.max / 2, -info.max / 2]
    return np.array(values, dtype=dtype)


def make_inputs(kind: str, seed: int, operands: list[Json]) -> list[np.ndarray]:
    """The inputs ``Case.make_inputs`` makes (core/cases/case.py, values.py), bit for bit
    where numpy's generator gives the same stream (the digests say whether it did)."""
    rng, arrays = np.random.default_rng(seed), []
    for operand in operands:
        shape, dtype = tuple(operand["shape"]), operand["dtype"]
        drawn: np.ndarray
        if kind == "exact":
            drawn = rng.integers(-3, 4, size=shape)
        elif kind == "special":
            drawn = rng.uniform(-1.0, 1.0, size=shape).astype(dtype)
            pool = specials(dtype)
            count = min(drawn.size, len(pool), max(4, drawn.size // 8))
            where = rng.choice(drawn.size, size=count, replace=False)
            order = np.concatenate([np.arange(4), 4 + rng.permutation(len(pool) - 4)])
            drawn.flat[where] = pool[order[:count]]
        elif kind == "random":
            drawn = rng.uniform(-1.0, 1.0, size=shape)
        else:
            raise ValueError(f"unknown input kind {kind!r} (a newer pack than this runner?)")
        array = np.empty(drawn.shape, np.dtype(dtype))
        np.copyto(array, drawn, casting="unsafe")
        arrays.append(array)
    return arrays


def input_sets(call: Json, case_dir: Path) -> list[list[np.ndarray]]:
    """Each call's input set, remade from the pack's recipe (or read from the case's
    ``.npy`` files, for inputs the recipe cannot remake) and checked by its digest."""
    recipe, sets = call["recipe"], []
    files = call.get("input_files") or [None] * len(recipe["seeds"])
    for seed, digest, names in zip(recipe["seeds"], call["inputs_sha256"], files, strict=True):
        if names is not None:
            made = [np.load(case_dir / name, allow_pickle=False) for name in names]
            if input_digest(made) != digest:
                raise RuntimeError(f"the pack's input files of seed {seed} are not those "
                                   "it was made with")
            sets.append(made)
            continue
        made = make_inputs(recipe["values"], seed, call["inputs"])
        if input_digest(made) != digest:
            raise RuntimeError(f"numpy {np.__version__} does not remake the inputs bit for "
                               f"bit (seed {seed}); the pack was made with numpy "
                               f"{recipe['numpy']}")
        sets.append(made)
    return sets
