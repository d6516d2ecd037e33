"""A case's process may not reach the processes around it, in two layers installed in
each worker's child before any case code runs (and inherited by everything it starts):

- a Landlock domain of its own (Linux 6.12 and later, Landlock ABI 6) with its signals
  scoped to it: it can signal, trace, read or write the memory or open the descriptors
  (``/proc/<pid>/mem``, ``/proc/<pid>/fd``, ``pidfd_getfd``) of no process but itself and
  what it starts. Every other process is out of reach, whichever way it is named (a pid,
  a group, ``-1``, a pidfd made from ``/proc/<pid>``): pytest, the template, the other
  xdist workers and the cases they run at the same time;
- a seccomp filter, which also holds where Landlock is absent: it refuses with ``EPERM``
  the calls that would signal, trace or write into the processes it descends from (pytest,
  the xdist controller, the template, an adapter's host), their other children (the other
  xdist workers, other targets' hosts) or their process groups, a signal to every process
  at once (``kill(-1)``), and ``prlimit`` of any process but itself; the scheduling and
  I/O-priority calls (``setpriority``, ``sched_setscheduler``, ``sched_setparam``,
  ``sched_setattr``, ``sched_setaffinity``, ``ioprio_set``) aimed at those same processes,
  or at every process of the user at once (``PRIO_USER``), which Landlock does not scope.
  Without Landlock it also refuses the calls that take a pidfd (``pidfd_send_signal``,
  ``pidfd_getfd``): a pidfd made from ``/proc/<pid>`` names no pid it could check.

The kernel's call fails; its case goes on and is judged as usual, and no other case, nor
the session, is touched: a kernel's ``kill(os.getppid())`` or ``killpg(pytest's group)``
used to end the session.

Its own process, group and descendants stay reachable (``abort``, ``raise``, a kernel's
helper processes). Linux on x86-64 and AArch64 (the filter names their system-call
numbers); elsewhere, or where the kernel refuses a layer, the child runs without it
(:func:`install` says which)."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import os
import platform
import struct
import sys
from collections.abc import Iterable

from pytest_xtc.core.workers.hygiene import libc

#: Calls refused when their target (argument ``index``) is a protected pid or group, by
#: architecture: (AUDIT_ARCH value, {call number: argument index}, calls always refused).
_ARCHES: dict[str, tuple[int, dict[int, int], tuple[int, ...]]] = {
    "x86_64": (0xC000003E,
               {62: 0,     # kill
                234: 0,    # tgkill
                129: 0,    # rt_sigqueueinfo
                297: 0,    # rt_tgsigqueueinfo
                434: 0,    # pidfd_open
                311: 0,    # process_vm_writev
                101: 1},   # ptrace (request, pid, ...)
               (200,)),    # tkill: a thread id of any process; no libc uses it any more
    "aarch64": (0xC00000B7,
                {129: 0, 131: 0, 138: 0, 240: 0, 434: 0, 271: 0, 117: 1},
                (130,)),
}
#: Scheduling calls, refused like the signals when their target is a protected pid, by
#: architecture: {call number: argument index} (what any process of a user may do to
#: another of the same user: renice it, idle it, pin it to one CPU, lower its I/O).
_SCHEDULING = {
    "x86_64": {141: 1,    # setpriority (which, who, prio)
               142: 0,    # sched_setparam
               144: 0,    # sched_setscheduler
               203: 0,    # sched_setaffinity
               314: 0,    # sched_setattr
               251: 1},   # ioprio_set (which, who, ioprio)
    "aarch64": {140: 1, 118: 0, 119: 0, 122: 0, 274: 0, 30: 1},
}
#: Calls whose first argument says what kind of id the second is: refused from this kind
#: on (a user's every process: ``PRIO_USER``, ``IOPRIO_WHO_USER``), by call number.
_WHOLE_USER = {"x86_64": {141: 2, 251: 3}, "aarch64": {140: 2, 30: 3}}
#: Calls allowed only on this process (argument ``index`` 0 or its pid): prlimit64.
_OWN = {"x86_64": {302: 0}, "aarch64": {261: 0}}
#: Calls taking a pidfd, refused whole where Landlock cannot scope them (same numbers on
#: both architectures): pidfd_send_signal, pidfd_getfd.
_BY_PIDFD = (424, 438)
#: Landlock's calls (the same numbers on both architectures) and what is asked of it.
CREATE_RULESET, RESTRICT_SELF = 444, 446
_RULESET_VERSION = 1  # landlock_create_ruleset's flag: give the ABI version
_SCOPE_SIGNAL = 2  # LANDLOCK_SCOPE_SIGNAL
_SCOPED_ABI = 6  # the first ABI that scopes signals (Linux 6.12)
_X32_BIT = 0x40000000  # x86-64's x32 calls: another numbering, refused whole
_MAX_PROTECTED = 200  # BPF's conditional jumps reach 255 instructions ahead
_LD_W_ABS, _JEQ, _JGE, _JA, _RET = 0x20, 0x15, 0x35, 0x05, 0x06
_ALLOW, _REFUSE = 0x7FFF0000, 0x00050000 | errno.EPERM  # SECCOMP_RET_ALLOW / _ERRNO
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2


def _stat_fields(pid: int) -> list[str]:
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()  # after "pid (comm)": state ppid pgrp


def _children(pid: int) -> set[int]:
    found: set[int] = set()
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{task}/children") as f:
                found.update(map(int, f.read().split()))
    return found


def protected() -> list[int]:
    """The pids and groups this process may not reach, nearest first: its ancestors (to
    init), their process groups, their other children; each as a pid and as a group
    (``-pid``), and ``-1``. This process, its group and its descendants are left out."""
    me = os.getpid()
    ancestors, groups, pid = [], [], os.getppid()
    with contextlib.suppress(OSError, ValueError, IndexError):
        while pid > 0 and pid not in ancestors:
            ancestors.append(pid)
            fields = _stat_fields(pid)
            groups.append(int(fields[2]))
            pid = int(fields[1])
    others = [c for a in ancestors for c in sorted(_children(a))]
    found: list[int] = [-1]
    for pid in (*ancestors, *groups, *others):
        for value in (pid, -pid):
            if value not in found and abs(value) not in (0, me):
                found.append(value)
    return found[:_MAX_PROTECTED]


def _program(arch: int, checked: dict[int, int], refused: Iterable[int],
             values: list[int], own: dict[int, int] | None = None,
             me: int = 0, kinds: dict[int, int] | None = None) -> list[tuple[int, int, int, int]]:
    """The BPF program: refuse ``refused`` calls; refuse ``checked`` calls whose argument
    (its low 32 bits: a pid_t) is one of ``values``, and those of them whose first argument
    is ``kinds[call]`` or more (an id of another kind: a user's); refuse ``own`` calls
    whose argument is neither 0 nor ``me``; allow the rest. Each checked call jumps to an
    entry of its own right after the calls' list, which goes on to its argument's block
    by an unconditional jump (a conditional one reaches 255 instructions ahead)."""
    own, kinds = own or {}, kinds or {}
    calls = [*refused, *checked, *own]
    near_refuse = 5 + len(calls) + 1  # after the calls' list and its "allow"
    entry_at, at = {}, near_refuse + 1
    for call in [*checked, *own]:
        entry_at[call] = at
        at += 4 if call in kinds else 1  # [load, compare the kind, refuse], jump
    blocks = [(True, index) for index in sorted({*own.values()})]
    blocks += [(False, index) for index in sorted({*checked.values()})]
    block_at = {}
    for is_own, index in blocks:  # own: load, 2 compares, refuse, allow
        block_at[is_own, index] = at
        at += 5 if is_own else 1 + len(values) + 2  # load, compares, allow, refuse
    program = [
        (_LD_W_ABS, 0, 0, 4),                    # seccomp_data.arch
        (_JEQ, 1, 0, arch),
        (_RET, 0, 0, _REFUSE),                   # another architecture's numbering
        (_LD_W_ABS, 0, 0, 0),                    # seccomp_data.nr
        (_JGE, near_refuse - 5, 0, _X32_BIT),
    ]
    for call in calls:
        target = entry_at.get(call, near_refuse)
        program.append((_JEQ, target - len(program) - 1, 0, call))
    program += [(_RET, 0, 0, _ALLOW), (_RET, 0, 0, _REFUSE)]
    for call in [*checked, *own]:
        if call in kinds:  # args[0] of kind ``kinds[call]`` or more: refused
            program += [(_LD_W_ABS, 0, 0, 16), (_JGE, 1, 0, kinds[call])]
        block = block_at[call in own, own[call] if call in own else checked[call]]
        program.append((_JA, 0, 0, block - len(program) - 1))
        if call in kinds:
            program.append((_RET, 0, 0, _REFUSE))
    for is_own, index in blocks:
        program.append((_LD_W_ABS, 0, 0, 16 + 8 * index))  # args[index], its low half
        if is_own:
            program += [(_JEQ, 2, 0, 0), (_JEQ, 1, 0, me & 0xFFFFFFFF),
                        (_RET, 0, 0, _REFUSE), (_RET, 0, 0, _ALLOW)]
            continue
        refuse = len(program) + len(values) + 1
        for value in values:
            program.append((_JEQ, refuse - len(program) - 1, 0, value & 0xFFFFFFFF))
        program += [(_RET, 0, 0, _ALLOW), (_RET, 0, 0, _REFUSE)]
    assert all(0 <= jt <= 255 for _, jt, _, _ in program)
    return program


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class RulesetAttr(ctypes.Structure):  # struct landlock_ruleset_attr, ABI 6
    _fields_ = [("handled_access_fs", ctypes.c_uint64),
                ("handled_access_net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


@functools.cache
def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 where there is none (or it is disabled)."""
    if not sys.platform.startswith("linux"):
        return 0
    version = libc().syscall(ctypes.c_long(CREATE_RULESET), None, ctypes.c_long(0),
                              ctypes.c_long(_RULESET_VERSION))
    return max(int(version), 0)


def scopes_signals() -> bool:
    """Whether a worker's child here enters a Landlock domain scoping its signals (and
    ptrace): then no process outside it, its parent's other children included, is
    within a case's reach (Linux 6.12 and later, on the architectures the fence knows)."""
    return platform.machine() in _ARCHES and landlock_abi() >= _SCOPED_ABI


def _scope() -> str | None:
    """Enter a Landlock domain of this process's own, its signals scoped to it (ptrace and
    the ``/proc/<pid>`` files that need ptrace's leave are scoped by any domain); None when
    done, else why not. Needs ``no_new_privs`` (:func:`install` sets it first)."""
    attr = RulesetAttr(0, 0, _SCOPE_SIGNAL)
    ruleset = int(libc().syscall(ctypes.c_long(CREATE_RULESET), ctypes.byref(attr),
                               ctypes.c_long(ctypes.sizeof(attr)), ctypes.c_long(0)))
    if ruleset < 0:
        return f"no Landlock domain: {os.strerror(ctypes.get_errno())}"
    try:
        if libc().syscall(ctypes.c_long(RESTRICT_SELF), ctypes.c_long(ruleset),
                        ctypes.c_long(0)) != 0:
            return f"no Landlock domain: {os.strerror(ctypes.get_errno())}"
    finally:
        os.close(ruleset)
    return None


def _load(program: list[tuple[int, int, int, int]]) -> bool:
    """Install a seccomp filter (``no_new_privs`` is set); whether the kernel took it."""
    raw = b"".join(struct.pack("<HBBI", *step) for step in program)
    buffer = ctypes.create_string_buffer(raw)
    fprog = _Fprog(len(program), ctypes.addressof(buffer))
    return libc().prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0,
                        0) == 0


def install() -> str | None:
    """Fence this process (and what it starts) in; None when both layers are in, else why
    not: "no fence: ..." (neither), "no Landlock domain: ..." (the seccomp layer alone).
    The Landlock domain comes first: where it is missing, the seccomp filter also refuses
    the calls that take a pidfd."""
    machine = platform.machine()
    arch = _ARCHES.get(machine)
    if not sys.platform.startswith("linux") or arch is None:
        return f"no fence on {sys.platform} {machine}"
    if libc().prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return f"no fence: the kernel refused it ({os.strerror(ctypes.get_errno())})"
    code, checked, refused = arch
    checked = {**checked, **_SCHEDULING[machine]}
    why = _scope() if landlock_abi() >= _SCOPED_ABI else (
        f"no Landlock domain: this kernel's Landlock ABI is {landlock_abi()} (signal "
        f"scoping needs {_SCOPED_ABI}, Linux 6.12); the seccomp layer alone")
    if why is not None:
        refused = (*refused, *_BY_PIDFD)
    if not _load(_program(code, checked, refused, protected(), _OWN[machine], os.getpid(),
                          _WHOLE_USER[machine])):
        return (f"no fence: the kernel refused the seccomp filter "
                f"({os.strerror(ctypes.get_errno())})"
                + ("; only the Landlock domain holds" if why is None else ""))
    return why
