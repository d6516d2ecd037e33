"""The checking side's work while a worker does the target's (the executors' ``meanwhile``).

numpy's BLAS runs it on one thread: a BLAS pool's threads spin for a while after each
call, and on a small machine that spin takes the core the worker compiles or times the
kernel on (a 4 MB matmul case compiled 10% slower beside two-thread references). The
limit holds for ``meanwhile`` only (``threadpoolctl``, the libraries found once).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_controller: Any = None


def one_blas_thread(meanwhile: Callable[[], None] | None) -> Callable[[], None] | None:
    """``meanwhile`` run with numpy's BLAS on one thread (None stays None)."""
    if meanwhile is None:
        return None
    work = meanwhile

    def limited() -> None:
        global _controller
        if _controller is None:
            from threadpoolctl import ThreadpoolController

            _controller = ThreadpoolController()
        with _controller.limit(limits=1, user_api="blas"):
            work()

    return limited
