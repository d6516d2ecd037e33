"""Copying ahead, in a case worker that waits for its case, the template's pages a case
writes.

A case's process starts as a copy-on-write image of its template: each of the template's
pages it writes (reference counts of XTC's and MLIR's Python objects, the allocators' free
lists) costs it a fault and a 4 KiB copy, some 3,300 pages a matmul compile, nearly the
same pages from one case to the next. A template whose workers are forked one case ahead
(``Worker(ahead=True)``) learns those pages from its first case workers while they still
live (:func:`learn`: their page tables, ``/proc/<pid>/pagemap``), and each later worker
copies them (:func:`populate`, ``MADV_POPULATE_WRITE``: no byte changes) while the case
before it runs, on a core that case leaves free: its own case no longer pays the copies.
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import select
from collections.abc import Iterable

import numpy as np

from pytest_xtc.core.workers.hygiene import libc

PAGE = mmap.PAGESIZE
#: At most this many pages are copied ahead (64 MiB of 4 KiB pages): a case's process that
#: writes far more than a compile (a kernel filling the heap) cannot make every later
#: worker copy the whole template.
MAX_PAGES = 1 << 14
_MADV_POPULATE_WRITE = 23  # Linux 5.14
_PRESENT, _EXCLUSIVE = np.uint64(1 << 63), np.uint64(1 << 56)  # a pagemap entry's bits
_SPECIAL = ("[stack]", "[vvar]", "[vvar_vclock]", "[vdso]", "[vsyscall]")
_CHECK_EVERY = 64  # ranges copied between two looks for a request already waiting

Ranges = tuple[tuple[int, int], ...]  # (first address, bytes)


def _private_writable(pid: int) -> dict[int, int]:
    """The private writable mappings of ``pid`` (start: end), the stack's and the kernel's
    own left out: where a case's process writes the template's pages."""
    found = {}
    with open(f"/proc/{pid}/maps") as maps:
        for line in maps:
            fields = line.split()
            name = fields[5] if len(fields) > 5 else ""
            if fields[1][:2] != "rw" or fields[1][3] != "p" or name in _SPECIAL:
                continue
            start, end = (int(bound, 16) for bound in fields[0].split("-"))
            found[start] = end
    return found


def learn(pid: int) -> frozenset[int]:
    """The pages (their addresses) the living child ``pid`` holds alone in the private
    writable mappings this process has too, where they start at the same address: those
    it wrote since it was forked (or this process wrote after it: the child keeps the old
    page). Empty where the kernel does not say (no pagemap, no exclusive bit)."""
    mine = _private_writable(os.getpid())
    written: set[int] = set()
    try:
        theirs = _private_writable(pid)
        fd = os.open(f"/proc/{pid}/pagemap", os.O_RDONLY)
    except OSError:
        return frozenset()
    try:
        for start, end in mine.items():
            end = min(end, theirs.get(start, start))
            if end <= start:
                continue
            raw = os.pread(fd, (end - start) // PAGE * 8, start // PAGE * 8)
            entries = np.frombuffer(raw[: len(raw) // 8 * 8], dtype=np.uint64)
            alone = np.flatnonzero((entries & (_PRESENT | _EXCLUSIVE)) == (_PRESENT | _EXCLUSIVE))
            written.update((start + alone * PAGE).tolist())
    except OSError:
        return frozenset()
    finally:
        os.close(fd)
    return frozenset(written)


def ranges(pages: Iterable[int]) -> Ranges:
    """``pages`` as runs of consecutive pages, at most :data:`MAX_PAGES` in all."""
    found: list[tuple[int, int]] = []
    for page in sorted(pages)[:MAX_PAGES]:
        if found and found[-1][0] + found[-1][1] == page:
            found[-1] = (found[-1][0], found[-1][1] + PAGE)
        else:
            found.append((page, PAGE))
    return tuple(found)


def populate(runs: Ranges, waiting: int = -1) -> int:
    """Copy the pages of ``runs`` into this process now, as a write would, without writing
    (``MADV_POPULATE_WRITE``); a run no longer mapped so is skipped. Stops early once the
    descriptor ``waiting`` is readable (a request came: the rest is copied on demand).
    Returns the number of pages copied."""
    if not runs:
        return 0
    madvise = libc().madvise
    done = 0
    for at, (start, length) in enumerate(runs):
        if waiting >= 0 and at % _CHECK_EVERY == 0 and select.select([waiting], [], [], 0)[0]:
            break
        if madvise(start, length, _MADV_POPULATE_WRITE) == 0:
            done += length // PAGE
        elif ctypes.get_errno() == errno.EINVAL:  # a kernel before 5.14: no such advice
            break
    return done
