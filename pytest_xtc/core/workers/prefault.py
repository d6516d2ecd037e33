"""Faulting in ahead, in a case worker that waits for its case, the memory a case touches.

A case's process starts as a copy-on-write image of its template, and each first touch of
a page costs it a fault (some 4 us on a virtual machine): each of the template's pages it
writes (reference counts of XTC's and MLIR's Python objects, the allocators' free lists) a
fault and a 4 KiB copy, some 3,300 pages a matmul compile; each page of code and
constants it runs or reads (a fork copies no page table entry of a file's mapping: some
250 faults of MLIR's code a compile); each page of the heap it grows beyond the template's
(MLIR's contexts and passes: some 650 pages). Nearly the same from one case to the next. A
template whose workers are forked one case ahead (``Worker(ahead=True)``) learns them from
its first case workers while they still live (:func:`learn`: their maps and page tables,
``/proc/<pid>/pagemap``), and each later worker faults them in (:func:`populate`:
``MADV_POPULATE_WRITE`` and ``_READ``, which change no byte; the heap grown by the C
allocator and given back to it) while the case before it runs, on a core that case leaves
free: its own case no longer pays the faults.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import mmap
import os
import select
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pytest_xtc.core.workers.hygiene import libc

PAGE = mmap.PAGESIZE
#: At most this many pages are faulted in ahead of each kind (64 MiB of 4 KiB pages): a
#: case's process that touches far more than a compile (a kernel filling the heap) cannot
#: make every later worker copy the whole template.
MAX_PAGES = 1 << 14
#: The heap is grown in pieces of this size: below the C allocator's smallest threshold for
#: a mapping of its own (128 KiB), so that they come from the heap.
HEAP_PIECE = 32 << 10
_MADV_POPULATE_READ, _MADV_POPULATE_WRITE = 22, 23  # Linux 5.14
PRESENT, _EXCLUSIVE = np.uint64(1 << 63), np.uint64(1 << 56)  # a pagemap entry's bits
_SPECIAL = ("[stack]", "[vvar]", "[vvar_vclock]", "[vdso]", "[vsyscall]")
_CHECK_EVERY = 64  # ranges copied between two looks for a request already waiting

Ranges = tuple[tuple[int, int], ...]  # (first address, bytes)


@dataclass(frozen=True)
class Seen:
    """What one case's process touched that its template did not hold for it."""

    written: frozenset[int] = frozenset()  # pages of the template's it wrote (addresses)
    read: frozenset[int] = frozenset()  # pages of the template's files' mappings it touched
    heap: int = 0  # bytes it took from the C allocator, where it grew the heap: else 0


@dataclass(frozen=True)
class Plan:
    """What a worker forked ahead faults in while it waits: what every case seen did."""

    written: Ranges = ()
    read: Ranges = ()
    heap: int = 0

    @classmethod
    def of(cls, seen: Sequence[Seen]) -> Plan:
        """The pages every one of ``seen`` wrote, and read, and the least heap taken."""
        if not seen:
            return cls()
        return cls(ranges(frozenset.intersection(*(s.written for s in seen))),
                   ranges(frozenset.intersection(*(s.read for s in seen))),
                   min(min(s.heap for s in seen), MAX_PAGES * PAGE))


NOTHING = Plan()  # a worker not forked ahead, or before its first cases have said


@dataclass(frozen=True)
class _Mapping:
    end: int
    mode: str  # "written": private and writable; "read": a file's, read-only; "heap"
    name: str


def _mappings(pid: int | str) -> dict[int, _Mapping]:
    """The mappings of ``pid`` a case's process faults in: private writable ones (the
    stack's and the kernel's own left out), files' read-only ones (code, constants), and
    the heap's, by start."""
    found = {}
    with open(f"/proc/{pid}/maps") as maps:
        for line in maps:
            fields = line.split()
            name = fields[5] if len(fields) > 5 else ""
            mode = fields[1]
            start, end = (int(bound, 16) for bound in fields[0].split("-"))
            if mode[3] != "p" or name in _SPECIAL:
                continue
            if mode[:2] == "rw":
                found[start] = _Mapping(end, "heap" if name == "[heap]" else "written", name)
            elif mode[0] == "r" and name.startswith("/"):
                found[start] = _Mapping(end, "read", name)
    return found


def program_break() -> int:
    """This process's program break: where its heap ends."""
    return int(libc().sbrk(0) or 0)


@dataclass(frozen=True)
class Heap:
    """A process's C heap at one moment: where it ended, how much of it was free."""

    end: int = 0  # the program break; 0: not measured
    free: int = 0  # bytes the C allocator held free (all its arenas: free chunks, tops)

    @classmethod
    def now(cls) -> Heap:
        return cls(program_break(), _free_bytes())


UNMEASURED = Heap()  # a child's whose heap nobody learns from


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


@functools.cache
def _mallinfo2() -> Any:
    found = getattr(libc(), "mallinfo2", None)  # glibc 2.33+
    if found is not None:
        found.restype = _MallInfo2
    return found


def _free_bytes() -> int:
    """The bytes this process's C allocator holds free (0 where it does not say). It walks
    the allocator's free lists: some 18 ms for 100,000 free chunks."""
    mallinfo2 = _mallinfo2()
    return 0 if mallinfo2 is None else int(mallinfo2().fordblks)


def learn(pid: int, heap: Heap) -> Seen:
    """What the living child ``pid`` touched since it was forked from this process (whose
    heap was ``heap`` then): the pages it holds alone in the private writable mappings
    this process has too (where they start at the same address: those it wrote, or this
    process wrote after it: the child keeps the old page); the pages present in its
    read-only mappings of files this process maps at the same address; the heap it took
    from the C allocator, where it grew the heap (how far beyond ``heap``'s end, and the
    free memory it found there first). Empty where the kernel does not say (no pagemap,
    no exclusive bit)."""
    written: set[int] = set()
    read: set[int] = set()
    try:
        mine, theirs = _mappings(os.getpid()), _mappings(pid)
        fd = os.open(f"/proc/{pid}/pagemap", os.O_RDONLY)
    except OSError:
        return Seen()
    try:
        for start, mapping in mine.items():
            other = theirs.get(start)
            if other is None or other.mode != mapping.mode or other.name != mapping.name:
                continue
            end = min(mapping.end, other.end)
            raw = os.pread(fd, (end - start) // PAGE * 8, start // PAGE * 8)
            entries = np.frombuffer(raw[: len(raw) // 8 * 8], dtype=np.uint64)
            if mapping.mode == "read":
                found, into = np.flatnonzero(entries & PRESENT), read
            else:
                wanted = PRESENT | _EXCLUSIVE
                found, into = np.flatnonzero((entries & wanted) == wanted), written
            into.update((start + found * PAGE).tolist())
    except OSError:
        return Seen()
    finally:
        os.close(fd)
    end = max((m.end for m in theirs.values() if m.mode == "heap"), default=0)
    grown = end - heap.end if heap.end else 0
    return Seen(frozenset(written), frozenset(read), grown + heap.free if grown > 0 else 0)


def ranges(pages: Iterable[int]) -> Ranges:
    """``pages`` as runs of consecutive pages, at most :data:`MAX_PAGES` in all."""
    found: list[tuple[int, int]] = []
    for page in sorted(pages)[:MAX_PAGES]:
        if found and found[-1][0] + found[-1][1] == page:
            found[-1] = (found[-1][0], found[-1][1] + PAGE)
        else:
            found.append((page, PAGE))
    return tuple(found)


def populate(plan: Plan, waiting: int = -1) -> int:
    """Fault in what ``plan`` says, now: its heap (bounded by the plan, not stopped), then
    its written pages (copied as a write would, without writing: ``MADV_POPULATE_WRITE``),
    then its read ones (mapped: ``MADV_POPULATE_READ``); a run no longer mapped so is
    skipped. The runs stop early once the descriptor ``waiting`` is readable (a request
    came: the rest faults on demand). Returns the number of pages faulted in."""
    done = grow_heap(plan.heap)
    for runs, advice in ((plan.written, _MADV_POPULATE_WRITE), (plan.read, _MADV_POPULATE_READ)):
        more = _advise(runs, advice, waiting)
        if more is None:
            break
        done += more
    return done


def _advise(runs: Ranges, advice: int, waiting: int) -> int | None:
    """Pages of ``runs`` faulted in by ``advice``; None once a request is waiting."""
    madvise = libc().madvise
    done = 0
    for at, (start, length) in enumerate(runs):
        if waiting >= 0 and at % _CHECK_EVERY == 0 and select.select([waiting], [], [], 0)[0]:
            return None
        if madvise(start, length, advice) == 0:
            done += length // PAGE
        elif ctypes.get_errno() == errno.EINVAL:  # a kernel before 5.14: no such advice
            break
    return done


def grow_heap(size: int) -> int:
    """Take ``size`` bytes from the C allocator in pieces (the free memory it holds first,
    then a grown heap, as a case's allocations would), and a piece more; write them, and
    give them back but for the highest piece (kept, so that the rest stays below it
    instead of being given back to the kernel): the allocations that come next find those
    pages present. Returns the number of pages written."""
    if size <= 0:
        return 0
    lib = libc()
    pieces: list[int] = []
    while len(pieces) * HEAP_PIECE <= size:
        piece = lib.malloc(HEAP_PIECE)
        if not piece:
            break
        pieces.append(piece)
    for piece in pieces:
        ctypes.memset(piece, 0, HEAP_PIECE)
    for piece in sorted(pieces)[:-1]:
        lib.free(piece)
    return len(pieces) * HEAP_PIECE // PAGE
