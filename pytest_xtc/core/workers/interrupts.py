"""A Ctrl-C that is never lost while a case runs. No pytest.

Python turns SIGINT into KeyboardInterrupt wherever the main thread happens to be. Raised
inside a finalizer or a garbage-collection callback it is printed as "ignored" (pytest
turns it into a warning), and code of an adapter running in this process may catch it
(``except BaseException``): the session then runs on as if no Ctrl-C had come. Once
:func:`install` has run, SIGINT is also noted; the waits of a case (isolation's watch of
a worker, the end of each case in the runner) call :func:`check`, which raises
KeyboardInterrupt again for a Ctrl-C noted and not yet taken. ``taken()`` marks it
handled (the session is ending) so that nothing after raises it twice.
"""

from __future__ import annotations

import os
import signal
import threading
from types import FrameType

_noted = False


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    global _noted
    _noted = True
    raise KeyboardInterrupt


def install() -> bool:
    """Note SIGINT from now on, where Python's own handler is in place and this is the
    main thread (else nothing changes: a handler someone chose is left alone)."""
    if threading.current_thread() is not threading.main_thread():
        return False
    current = signal.getsignal(signal.SIGINT)
    if current is _on_sigint:
        return True
    if current is not signal.default_int_handler:
        return False
    signal.signal(signal.SIGINT, _on_sigint)
    return True


def uninstall() -> None:
    """Python's own handler again, where this module's is in place."""
    taken()
    if (threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) is _on_sigint):
        signal.signal(signal.SIGINT, signal.default_int_handler)


def check() -> None:
    """Raise KeyboardInterrupt for a Ctrl-C noted and not yet taken."""
    if _noted:
        raise KeyboardInterrupt


def taken() -> None:
    """The noted Ctrl-C is being handled: :func:`check` passes again."""
    global _noted
    _noted = False


os.register_at_fork(after_in_child=taken)  # a child forked after a Ctrl-C has none
