"""Plain XTC, no plugin: compile each of the benchmark's matmul cases, then call its
kernel as many times as the suite does (``runner.CALLS``), each call on fresh random
inputs and checked against a numpy reference computed for that call, then once more on
the first call's inputs (the suite's timed call, a single one at ``--xtc-repeat=0``),
checked against that call's reference.

What a user would write by hand to do the suite's work; the benchmark compares the plugin
against it. ``--one``: the first case alone (start-up costs). ``--kept-runtime``: XTC's
host runtime taken from the suite's cache as the plugin takes it (core/execution/
runtime_cache.py), so that a comparison shows the plugin's own cost alone.
"""

from __future__ import annotations

import sys
import tempfile
from typing import Any

import numpy as np

from pytest_xtc.core.xtc.xtc_env import bootstrap

CALLS = 2  # fresh-input calls per case, as the suite makes (core/execution/runner.CALLS)

SHAPES = [(13, 11, 7), (31, 37, 29), (33, 65, 17), (64, 64, 64)]
SCHEDULES: dict[str, list[tuple[Any, ...]]] = {
    "none": [],
    "tile": [("tile", "i", {"i1": 4}), ("tile", "j", {"j1": 16})],
    "tile+interchange": [
        ("tile", "i", {"i1": 4}),
        ("tile", "j", {"j1": 16}),
        ("interchange", ["i", "j", "k", "i1", "j1"]),
    ],
    "unroll": [
        ("tile", "i", {"i1": 4}),
        ("interchange", ["i", "j", "k", "i1"]),
        ("unroll", {"i1": 4}),
    ],
    "vectorize": [
        ("tile", "j", {"j1": 16}),
        ("interchange", ["i", "k", "j", "j1"]),
        ("vectorize", ["j1"]),
    ],
    "parallelize": [("tile", "i", {"i1": 4}), ("parallelize", ["i"])],
    "pack_at": [("tile", "i", {"i1": 4}), ("pack_at", "i1", 1)],
}


def checked_calls(module: Any, shape: tuple[int, int, int], seed: int,
                  dtype: str = "float32") -> str:
    """The suite's kernel calls of one compiled matmul ``shape`` (i, j, k): ``CALLS``
    on fresh inputs, then one more on the first inputs, each checked against numpy.
    Returns what failed, or ""."""
    i, j, k = shape
    references = []
    for call in range(CALLS + 1):  # the last: the timed call, on the first inputs
        if call < CALLS:
            rng = np.random.default_rng([seed, call])
            x = rng.uniform(-1, 1, (i, k)).astype(dtype)
            y = rng.uniform(-1, 1, (k, j)).astype(dtype)
            references.append((x, y, x.astype(np.float64) @ y.astype(np.float64)))
        x, y, reference = references[call % CALLS]
        c = np.empty((i, j), dtype)
        evaluator = module.get_evaluator(
            parameters=([x, y], [c]), repeat=1, number=1, min_repeat_ms=0
        )
        _, code, error = evaluator.evaluate()
        if code or not np.allclose(c, reference, rtol=1e-4, atol=1e-5):
            return f"call {call} failed: {error}"
    return ""


def workload() -> list[tuple[str, tuple[int, int, int], str]]:
    """(dtype, shape, schedule) of each case: every shape with every schedule, in float32
    unless ``--dtypes`` gives each one's dtype (``float64,float32,...``, in that order: the
    catalog's, which turns the dtype of its hand-picked shapes)."""
    cases = [(s, name) for s in SHAPES for name in SCHEDULES]
    given = sys.argv[sys.argv.index("--dtypes") + 1].split(",") if "--dtypes" in sys.argv \
        else ["float32"] * len(cases)
    if len(given) != len(cases):
        sys.exit(f"--dtypes gives {len(given)} dtypes for {len(cases)} cases")
    chosen = [(dtype, shape, name) for dtype, (shape, name) in zip(given, cases, strict=True)]
    return chosen[:1] if "--one" in sys.argv else chosen  # --one: start-up costs


def main() -> int:
    bootstrap()  # the OpenMP runtime, as any XTC user on this machine needs
    import xtc.graphs.xtc.op as O
    from xtc.backends.mlir import Backend

    if "--kept-runtime" in sys.argv:
        from pytest_xtc.core.xtc import runtime_cache

        runtime_cache.install()

    workdir = tempfile.mkdtemp()
    for n, (dtype, (i, j, k), name) in enumerate(workload()):
        steps = SCHEDULES[name]
        a, b = O.tensor((i, k), dtype, name="A"), O.tensor((k, j), dtype, name="B")
        with O.graph(name="matmul") as gb:
            O.matmul(a, b, name="C")
        backend = Backend(gb.graph)
        scheduler = backend.get_scheduler()
        for primitive, *args in steps:
            getattr(scheduler, primitive)(*args)
        compiler = backend.get_compiler(shared_lib=True, dump_file=f"{workdir}/k{n}")
        module = compiler.compile(scheduler.schedule())
        failed = checked_calls(module, (i, j, k), n, dtype)
        if failed:
            print(f"case {n} ({name}) {failed}", file=sys.stderr)
            return 1
    print(f"{n + 1} cases")
    return 0


if __name__ == "__main__":
    sys.exit(main())
