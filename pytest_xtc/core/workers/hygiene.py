"""A worker's clean state: what a kernel can change in its process, and what it leaves.

:func:`fingerprint` reads, cheaply (tens of microseconds), the process state a kernel can
change and the next case would inherit: signal handlers, mask and pending timers, the
recursion limit, the environment, the working directory, fds 0, 1 and 2, rlimits, umask,
``sys.path`` and the import hooks, tracing, numpy's error state, the locale, the floating
point rounding mode, affinity and niceness, threads. The worker takes it when it starts
and after each request; :func:`changes` names what differs, and a worker whose state
changed is replaced before the next case (a fork, outside any case's clock).

:func:`become_subreaper` makes orphans of the worker's descendants (daemons that double
fork and ``setsid`` out of its process group) its children; :func:`end_strays` kills and
reaps every such process after a request, and :func:`descendants` finds them from outside.
:func:`forget_registrations` removes what a killed process's OpenMP runtime left in
``/dev/shm`` (it would otherwise be found, once its pid is reused, by a later case).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import gc
import locale
import os
import signal
import sys
import threading
from collections.abc import Iterable
from typing import Any

_PR_SET_CHILD_SUBREAPER = 36
_TIMERS = ("ITIMER_REAL", "ITIMER_VIRTUAL", "ITIMER_PROF")
_SIGNALS = sorted(set(signal.valid_signals()) - {signal.SIGKILL, signal.SIGSTOP})
@functools.cache
def libc() -> Any:
    """The C library, loaded once (by the template: its children find it loaded), with
    ``prctl``'s, ``syscall``'s, ``madvise``'s, ``mmap``'s, ``malloc``'s, ``free``'s and
    ``sbrk``'s types declared."""
    loaded = ctypes.CDLL(None, use_errno=True)
    loaded.mmap.restype = ctypes.c_void_p
    loaded.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                            ctypes.c_int, ctypes.c_long]
    loaded.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong,
                             ctypes.c_ulong]
    loaded.syscall.restype = ctypes.c_long
    loaded.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    loaded.malloc.restype = ctypes.c_void_p
    loaded.malloc.argtypes = [ctypes.c_size_t]
    loaded.free.argtypes = [ctypes.c_void_p]
    loaded.sbrk.restype = ctypes.c_void_p
    loaded.sbrk.argtypes = [ctypes.c_ssize_t]
    return loaded


def _handler(number: int) -> object:
    try:
        handler = signal.getsignal(number)
    except (ValueError, OSError):
        return None
    return handler if isinstance(handler, int) or handler is None else id(handler)


def _fd(number: int) -> object:
    try:
        stat = os.fstat(number)
    except OSError:
        return "closed"
    return (stat.st_dev, stat.st_ino)


def _umask() -> int:
    mask = os.umask(0o22)
    os.umask(mask)
    return mask


#: How far a kernel's stack may grow in a worker (up to the hard limit; the address space
#: below the main thread's stack bounds it further, to 128 MB or more on Linux).
KERNEL_STACK = 1 << 30


def roomy_stack() -> None:
    """Raise this process's soft stack limit towards :data:`KERNEL_STACK`. XTC's host code
    keeps a graph's intermediates on the stack: a VGG-16 layer's padded 224x224x64 image
    (13 MB) overflows the usual 8 MB and the kernel, correct, dies of SIGSEGV."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_STACK)
    want = KERNEL_STACK if hard == resource.RLIM_INFINITY else min(hard, KERNEL_STACK)
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_STACK, (want, hard))


def _rlimits() -> tuple[Any, ...]:
    import resource

    names = sorted(n for n in dir(resource) if n.startswith("RLIMIT_"))
    return tuple((n, resource.getrlimit(getattr(resource, n))) for n in names)


def _numpy() -> object:
    numpy = sys.modules.get("numpy")
    if numpy is None:
        return None
    return (tuple(sorted(numpy.geterr().items())), numpy.getbufsize(),
            id(numpy.geterrcall()), str(numpy.get_printoptions()))


def _rounding() -> object:
    with contextlib.suppress(Exception):
        return int(libc().fegetround())
    return None


def _cwd() -> str:
    try:
        return os.getcwd()
    except OSError:
        return "gone"


#: Variables a case worker sets for each case itself (its private temporary folder, the
#: session's lock folder: :mod:`confinement`), left out of the environment compared.
CONFINED_ENV = frozenset({"TMPDIR", "TMP", "TEMP", "XTC_LOCK_DIR"})


def fingerprint() -> dict[str, object]:
    """The process state a case could leave to the next one, as comparable values."""
    return {
        "signal handlers": tuple(_handler(n) for n in _SIGNALS),
        "blocked signals": tuple(sorted(signal.pthread_sigmask(signal.SIG_BLOCK, []))),
        "pending timers": tuple(
            signal.getitimer(getattr(signal, t)) != (0.0, 0.0) for t in _TIMERS
        ),
        "recursion limit": sys.getrecursionlimit(),
        "environment": tuple(sorted((k, v) for k, v in os.environ.items()
                                    if k not in CONFINED_ENV)),
        "working directory": _cwd(),
        "standard streams": (tuple(_fd(n) for n in (0, 1, 2)),
                             id(sys.stdin), id(sys.stdout), id(sys.stderr)),
        "rlimits": _rlimits(),
        "umask": _umask(),
        "sys.path": tuple(sys.path),
        "import hooks": (tuple(map(id, sys.meta_path)), tuple(map(id, sys.path_hooks))),
        "tracing": (id(sys.gettrace()), id(sys.getprofile()), sys.getswitchinterval()),
        "garbage collector": (gc.isenabled(), gc.get_threshold()),
        "numpy state": _numpy(),
        "locale": locale.setlocale(locale.LC_ALL, None),
        "rounding mode": _rounding(),
        "scheduling": (tuple(sorted(os.sched_getaffinity(0))) if hasattr(os, "sched_getaffinity")
                       else None, os.getpriority(os.PRIO_PROCESS, 0)),
        "threads": threading.active_count(),
    }


def changes(before: dict[str, object], after: dict[str, object]) -> list[str]:
    """What differs between two fingerprints, by name."""
    return [name for name, value in before.items() if after.get(name) != value]


def disarm_timers() -> None:
    """Cancel pending interval timers (a kernel's ``alarm``), so the reply gets out."""
    for name in _TIMERS:
        with contextlib.suppress(OSError):
            signal.setitimer(getattr(signal, name), 0)


def become_subreaper() -> None:
    """Linux: orphaned descendants become this process's children, not init's."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            libc().prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _listed_children(pid: int) -> set[int] | None:
    """``pid``'s children from its threads' ``children`` files (Linux 3.5+); None where the
    kernel has none. A process already gone has none."""
    found: set[int] = set()
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as listing:
                found.update(int(p) for p in listing.read().split())
        except FileNotFoundError:
            if not os.path.isdir(f"/proc/{pid}/task/{task}"):
                continue  # a thread that ended meanwhile
            return None
        except OSError:
            continue
    return found


def _children(pid: int) -> set[int]:
    """``pid``'s children, from /proc (every thread's list, or a scan of all stats)."""
    listed = _listed_children(pid)
    if listed is not None:
        return listed
    return {child for child, parent in _parents().items() if parent == pid}


def _stat(pid: int | str) -> list[str]:
    """The fields of ``/proc/PID/stat`` after the command (state, ppid, pgrp, session...);
    [] for a process gone or unreadable."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def process_state(pid: int) -> str:
    """``pid``'s state letter (``R``, ``S``, ``D``, ``T`` stopped, ``Z`` dead...), "" if gone."""
    fields = _stat(pid)
    return fields[0] if fields else ""


def _parents() -> dict[int, int]:
    parents: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and len(fields := _stat(name)) > 1:
            parents[int(name)] = int(fields[1])
    return parents


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (children, theirs...): from the ``children`` lists
    of ``pid`` and its descendants (a few reads), or one scan of every process's stat where
    the kernel keeps no such list."""
    if not os.path.isdir("/proc"):
        return []
    found: list[int] = []
    todo = [pid]
    while todo:
        listed = _listed_children(todo.pop())
        if listed is None:
            return _scanned_descendants(pid)
        found.extend(listed)
        todo.extend(listed)
    return found


def _scanned_descendants(pid: int) -> list[int]:
    below: dict[int, list[int]] = {}
    for child, parent in _parents().items():
        below.setdefault(parent, []).append(child)
    found, todo = [], list(below.get(pid, []))
    while todo:
        child = todo.pop()
        found.append(child)
        todo.extend(below.get(child, []))
    return found


def adopted_zombies(known: set[int]) -> list[int]:
    """This process's dead children that it did not fork itself: orphans it adopted as a
    subreaper (a killed worker's sentinel), which nobody else will reap. Children of this
    process's own session (``subprocess`` runs) and ``known`` ones are left to their
    owners, so that no other waiter loses a child's exit status."""
    session = str(os.getsid(0))
    return [child for child in _children(os.getpid()) - known
            if (fields := _stat(child))[:1] == ["Z"] and fields[3] != session]


def end_strays(keep: set[int], rounds: int = 20) -> int:
    """SIGKILL and reap every descendant of this process but ``keep`` (and theirs); how
    many were ended. Orphans reparent here (:func:`become_subreaper`), so a few rounds
    catch the daemons of a double fork too."""
    ended: set[int] = set()
    me = os.getpid()
    for _ in range(rounds):
        children = _children(me) - keep
        if not children:
            break
        strays = set(descendants(me)) - keep if len(children) else set()
        for pid in strays | children:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        forget_registrations(strays | children)
        for pid in children:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, 0)
        ended |= strays | children
    return len(ended)


#: Where LLVM's OpenMP runtime registers a process (``_<pid>_<uid>``); the runtime removes
#: its file at exit, never when SIGKILLed.
OPENMP_REGISTRATION = "/dev/shm/__KMP_REGISTERED_LIB_{pid}_{uid}"


def forget_registrations(pids: Iterable[int]) -> None:
    """Remove the OpenMP registrations of ``pids``, killed (not reaped yet: their pids not
    reused), so that no later process given one of their pids finds a stale one."""
    uid = os.getuid()
    for pid in pids:
        with contextlib.suppress(OSError):
            os.unlink(OPENMP_REGISTRATION.format(pid=pid, uid=uid))
