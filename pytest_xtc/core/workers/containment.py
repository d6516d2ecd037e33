"""Keeping a forked worker inside its box: its own session, dying with its parent, its
own standard streams, no inherited descriptor; and ending it with everything it started.
Used by :mod:`isolation`; POSIX only."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from typing import Any

from pytest_xtc.core.workers import hygiene

_PR_SET_PDEATHSIG = 1


def die_with(parent: int) -> None:
    """Linux: SIGKILL this process when its parent dies (and check it is not dead yet)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            hygiene.libc().prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(70)


#: The sentinel as a small program (``/bin/sh``): started with posix_spawn, it costs a
#: fraction of a fork of this (large) process. Its standard input is the lifeline.
_SENTINEL_SH = "/bin/sh"
_SENTINEL_SCRIPT = "while read -r _; do :; done; kill -KILL 0"


def sentinel(lifeline: int) -> int:
    """Start a small process of this group that kills the group when ``lifeline`` reads
    EOF: when the parent, the only holder of its write end, is gone (even by SIGKILL).
    Returns its pid. ``/bin/sh`` reading the lifeline on its standard input where there is
    one (spawned: no copy of this process), else a fork of this process."""
    if os.path.exists(_SENTINEL_SH) and hasattr(os, "posix_spawn"):
        try:
            return _spawned_sentinel(lifeline)
        except OSError:
            pass
    pid = os.fork()
    if pid != 0:
        os.close(lifeline)
        return pid
    try:
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        close_fds_except({0, 1, 2, lifeline})
        while True:
            with contextlib.suppress(InterruptedError):
                if os.read(lifeline, 1) == b"":
                    break
        os.killpg(0, signal.SIGKILL)
    finally:
        os._exit(0)


def _spawned_sentinel(lifeline: int) -> int:
    """``sh`` with the lifeline as its fd 0, /dev/null as 1 and 2, nothing else open (the
    lifeline's own fd closed after it is copied to 0)."""
    actions: list[tuple[Any, ...]] = [(os.POSIX_SPAWN_DUP2, lifeline, 0),
                                      (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                                      (os.POSIX_SPAWN_DUP2, 1, 2)]
    actions += [(os.POSIX_SPAWN_CLOSE, fd) for fd in _open_fds() if fd > 2]
    pid = os.posix_spawn(_SENTINEL_SH, [_SENTINEL_SH, "-c", _SENTINEL_SCRIPT],
                         {"PATH": "/usr/bin:/bin"}, file_actions=actions)
    os.close(lifeline)
    return pid


def own_stdio(log: int) -> None:
    """fds 0, 1, 2 become /dev/null and the log; Python's streams write to the log."""
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    sys.stdin = open(0, closefd=False)  # noqa: SIM115 (the child's, for its life)
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115


def _open_fds() -> list[int]:
    """This process's open descriptors (or every one up to 255 where /proc cannot say)."""
    try:
        return [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        return list(range(3, 256))


def close_fds_except(keep: set[int]) -> None:
    """Close every open descriptor not in ``keep`` (inherited pipes, sockets, files)."""
    for fd in _open_fds():
        if fd not in keep:
            with contextlib.suppress(OSError):
                os.close(fd)


def kill_tree(pid: int, reap: bool = True) -> None:
    """SIGKILL the process group led by ``pid``, ``pid`` itself and every descendant that
    left the group (a ``setsid`` daemon reparented to the worker), then reap ``pid``
    (unless not ``reap``: the caller reaps it later, see :func:`reap_later`)."""
    strays = hygiene.descendants(pid)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    for each in (pid, *strays):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(each, signal.SIGKILL)
    hygiene.forget_registrations((pid, *strays))
    if not reap:
        _dying.add(pid)
        return
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


_dying: set[int] = set()  # killed children of this process not reaped yet


def reap_dying(block: bool = False, known: set[int] | frozenset[int] = frozenset()) -> None:
    """Reap the children :func:`kill_tree` left to die (``block``: wait for each), and the
    dead orphans this subreaper adopted (not ``known``: live workers' children)."""
    for pid in hygiene.adopted_zombies(set(known) | _dying):
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
    for pid in list(_dying):
        try:
            done, _ = os.waitpid(pid, 0 if block else os.WNOHANG)
        except ChildProcessError:
            done = pid
        if done:
            _dying.discard(pid)
