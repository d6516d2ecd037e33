"""A case's process may not reach the processes around it: a seccomp filter, installed in
each worker's child before any case code runs (and inherited by everything it starts),
refuses with ``EPERM`` the calls that would signal, trace, write into or lower the limits
of the processes it descends from (pytest, the xdist controller, the template, an
adapter's host), of their other children (the other xdist workers, other targets' hosts)
or of their process groups, and a signal to every process at once (``kill(-1)``). The
kernel's call fails; its case goes on and is judged as usual, and no other case, nor the
session, is touched: a kernel's ``kill(os.getppid())`` or ``killpg(pytest's group)``
used to end the session.

Its own process, group and descendants stay reachable (``abort``, ``raise``, a kernel's
helper processes). Linux on x86-64 and AArch64 (the filter names their system-call
numbers); elsewhere, or where the kernel refuses a filter, the child runs without one
(:func:`install` says which)."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import platform
import struct
import sys
from collections.abc import Iterable

#: Calls refused when their target (argument ``index``) is a protected pid or group, by
#: architecture: (AUDIT_ARCH value, {call number: argument index}, calls always refused).
_ARCHES = {
    "x86_64": (0xC000003E,
               {62: 0,     # kill
                234: 0,    # tgkill
                129: 0,    # rt_sigqueueinfo
                297: 0,    # rt_tgsigqueueinfo
                434: 0,    # pidfd_open
                311: 0,    # process_vm_writev
                302: 0,    # prlimit64
                101: 1},   # ptrace (request, pid, ...)
               (200,)),    # tkill: a thread id of any process; no libc uses it any more
    "aarch64": (0xC00000B7,
                {129: 0, 131: 0, 138: 0, 240: 0, 434: 0, 271: 0, 261: 0, 117: 1},
                (130,)),
}
_X32_BIT = 0x40000000  # x86-64's x32 calls: another numbering, refused whole
_MAX_PROTECTED = 200  # BPF's conditional jumps reach 255 instructions ahead
_LD_W_ABS, _JEQ, _JGE, _RET = 0x20, 0x15, 0x35, 0x06
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
             values: list[int]) -> list[tuple[int, int, int, int]]:
    """The BPF program: refuse ``refused`` calls; refuse ``checked`` calls whose argument
    (its low 32 bits: a pid_t) is one of ``values``; allow the rest. Every refusal jumps
    to a ``ret`` close by (a conditional jump reaches 255 instructions ahead)."""
    calls = [*refused, *checked]
    arguments = sorted({*checked.values()})
    near_refuse = 5 + len(calls) + 1  # after the calls' list and its "allow"
    block_size = 1 + len(values) + 2  # load, compares, allow, refuse
    block_at = {index: near_refuse + 1 + n * block_size for n, index in enumerate(arguments)}
    program = [
        (_LD_W_ABS, 0, 0, 4),                    # seccomp_data.arch
        (_JEQ, 1, 0, arch),
        (_RET, 0, 0, _REFUSE),                   # another architecture's numbering
        (_LD_W_ABS, 0, 0, 0),                    # seccomp_data.nr
        (_JGE, near_refuse - 5, 0, _X32_BIT),
    ]
    for call in calls:
        target = block_at[checked[call]] if call in checked else near_refuse
        program.append((_JEQ, target - len(program) - 1, 0, call))
    program += [(_RET, 0, 0, _ALLOW), (_RET, 0, 0, _REFUSE)]
    for index in arguments:
        program.append((_LD_W_ABS, 0, 0, 16 + 8 * index))  # args[index], its low half
        refuse = len(program) + len(values) + 1
        for value in values:
            program.append((_JEQ, refuse - len(program) - 1, 0, value & 0xFFFFFFFF))
        program += [(_RET, 0, 0, _ALLOW), (_RET, 0, 0, _REFUSE)]
    assert all(0 <= jt <= 255 for _, jt, _, _ in program)
    return program


def install() -> str | None:
    """Fence this process (and what it starts) in; None when done, else why not."""
    arch = _ARCHES.get(platform.machine())
    if not sys.platform.startswith("linux") or arch is None:
        return f"no fence on {sys.platform} {platform.machine()}"
    code, checked, refused = arch
    program = _program(code, checked, refused, protected())
    raw = b"".join(struct.pack("<HBBI", *step) for step in program)
    buffer = ctypes.create_string_buffer(raw)

    class _Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = _Fprog(len(program), ctypes.addressof(buffer))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong,
                           ctypes.c_ulong]
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or \
            libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0,
                       0) != 0:
        return f"no fence: the kernel refused it ({os.strerror(ctypes.get_errno())})"
    return None
