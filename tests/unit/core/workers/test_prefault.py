"""Case workers forked one case ahead (``Worker(ahead=True)``, core/workers/isolation.py):
the next call's child, forked once a call's child has its request, waits through that
call out of its reach, faulting in the memory the first calls touched: the template's
pages they wrote, its files' pages they read, the heap they grew
(core/workers/prefault.py); a child whose scheduling a call changed meanwhile, or
that was born with a scheduling the call gave the template, serves no call. And the
host's worker, whose last child is killed once its reply is out (``defer_next``), never
serves a second call in it."""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import mmap
import os
import resource
import tempfile
import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from pytest_xtc.core.workers import fence, hygiene, isolation, prefault, template, transfer
from pytest_xtc.plugin.session import _free_core

needs_scoping = pytest.mark.skipif(
    not fence.scopes_signals(),
    reason="a worker is forked ahead only where Landlock scopes signals (Linux 6.12+)")

#: the template's memory each call of :func:`write_pages` writes one byte of each page of
DATA = bytearray(os.urandom(1 << 10) * (8 << 10))  # 8 MiB
PAGES = len(DATA) // prefault.PAGE


def write_pages(request: Any, report: Any) -> tuple[int, str, int]:
    """Sleep ``request`` seconds (the next spare gets ready meanwhile), then write a byte
    of every page of :data:`DATA`: the page faults that took, the digest of DATA as the
    call found it, this process's niceness."""
    time.sleep(request or 0)
    digest = hashlib.sha256(DATA).hexdigest()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for at in range(0, len(DATA), prefault.PAGE):
        DATA[at] ^= 0xFF
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    return faults, digest, os.getpriority(os.PRIO_PROCESS, 0)


#: a file's pages the template maps read-only, unread: each call reads a byte of each page
#: (a fork copies no page table entry of such a mapping: the child faults each page in)
_FILE = tempfile.NamedTemporaryFile(prefix="pytest-xtc-prefault-")  # noqa: SIM115
_FILE.write(DATA)
_FILE.flush()
MAPPED = mmap.mmap(_FILE.fileno(), len(DATA), flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ)


def read_pages(request: Any, report: Any) -> int:
    """Sleep ``request`` seconds, then read a byte of every page of :data:`MAPPED`: the
    page faults that took."""
    time.sleep(request or 0)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for at in range(0, len(DATA), prefault.PAGE):
        MAPPED[at]  # each page read: the fault, if any, is the point
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def grow_heap(request: Any, report: Any) -> int:
    """Sleep ``request`` seconds, then take 8 MiB from the C allocator in small pieces (the
    free memory it holds, then a heap grown beyond the template's) and write a byte of each
    page: the page faults that took."""
    time.sleep(request or 0)
    lib = hygiene.libc()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(len(DATA) // prefault.HEAP_PIECE):
        piece = lib.malloc(prefault.HEAP_PIECE)
        for at in range(0, prefault.HEAP_PIECE, prefault.PAGE):
            ctypes.memset(piece + at, 1, 1)
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def renice_siblings(request: Any, report: Any) -> int:
    """Raise the niceness of every other child of this process's parent but those in
    ``request`` (there before the call: the spare forked for the next call as this one
    began, waited for); how many it reached."""
    deadline = time.monotonic() + 10
    while not (siblings := hygiene._children(os.getppid()) - {os.getpid(), *request}) \
            and time.monotonic() < deadline:
        time.sleep(0.01)
    for pid in siblings:
        os.setpriority(os.PRIO_PROCESS, pid, 15)
    return len(siblings)


def _worker(handler: Any, **options: Any) -> isolation.Worker:
    return isolation.Worker(handler, fresh=True, **options)


@needs_scoping
def test_spares_copy_the_pages_the_first_cases_wrote_changing_no_byte() -> None:
    """Calls 1 and 2 teach the template the pages a call writes; a spare forked after
    them (as call 3 begins) copies those pages while call 3 runs: its own call then writes
    them with a fraction of the faults. No call finds a byte of the template's data
    changed."""
    expected = hashlib.sha256(DATA).hexdigest()
    found, unprepared = _ahead_and_not(write_pages)
    assert all(digest == expected for _, digest, _ in [*found, unprepared])
    assert unprepared[0] >= PAGES  # a copy-on-write fault for each page written
    assert found[0][0] >= PAGES and found[2][0] >= PAGES  # not learned when forked
    for faults, _, _ in found[3:]:  # forked once calls 1 and 2 had said
        assert faults < PAGES // 10, faults


@needs_scoping
def test_spares_map_the_file_pages_the_first_cases_read() -> None:
    """Calls 1 and 2 read the template's file pages (code, constants: a fork leaves them
    unmapped in the child, each first read a fault); a spare forked after them maps the
    same while the call before its own runs. A worker not forked ahead has none mapped."""
    ahead, plain = _worker(read_pages, ahead=True), _worker(read_pages)
    try:
        found = [ahead.call(0, {"x": 30}, "x") for _ in range(3)]
        prepared = _present(ahead._spares[0].pid, MAPPED)
        plain.call(0, {"x": 30}, "x")
        unprepared = _present(plain._spares[0].pid, MAPPED)
        last = ahead.call(0, {"x": 30}, "x")
    finally:
        ahead.stop()
        plain.stop()
    assert min(found) > 0 and unprepared == 0
    assert prepared == PAGES and last < min(found), (prepared, found, last)


@needs_scoping
def test_spares_grow_the_heap_as_the_first_cases_did() -> None:
    """Calls 1 and 2 grow the C allocator's heap by 8 MiB; spares forked after them grow
    theirs as much (and give it back to the allocator) while the call before theirs runs:
    their own call writes its heap with a fraction of the faults."""
    with _heap_taken():
        found, unprepared = _ahead_and_not(grow_heap)
    # about a fault a page (a few may be in already: 2046 of 2048 seen once under load)
    assert unprepared >= PAGES - PAGES // 64 and found[0] >= PAGES - PAGES // 64
    for faults in found[3:]:  # forked once calls 1 and 2 had said
        assert faults < PAGES // 16, found


@needs_scoping
def test_spares_take_what_the_first_cases_took_from_the_heap_not_what_it_grew() -> None:
    """Calls 1 and 2 find 4 MiB free in the template's heap and take it before growing the
    heap by 4 MiB more; the template then takes those 4 MiB itself: spares forked after it
    give their call the whole 8 MiB the first calls took, not the 4 MiB the heap grew."""
    lib, half = hygiene.libc(), len(DATA) // prefault.HEAP_PIECE // 2
    with _heap_taken() as held:
        pieces = sorted(lib.malloc(prefault.HEAP_PIECE) for _ in range(half + 1))
        held.append(pieces[-1])
        for piece in pieces[:-1]:  # free memory below the highest piece, kept
            lib.free(piece)
        ahead = _worker(grow_heap, ahead=True)
        try:
            found = [ahead.call(0.3, {"x": 30}, "x") for _ in range(2)]
            held += [lib.malloc(prefault.HEAP_PIECE) for _ in range(half)]
            found += [ahead.call(0.3, {"x": 30}, "x") for _ in range(3)]
        finally:
            ahead.stop()
    for faults in found[3:]:  # forked once calls 1 and 2 had said, the 4 MiB held
        assert faults < PAGES // 16, found


@contextlib.contextmanager
def _heap_taken() -> Iterator[list[int]]:
    """Within: the free memory the C allocator held (a test process's: whatever ran in it
    before) taken, in pieces until one comes from beyond the heap's end, so that a call
    of :func:`grow_heap` grows the heap (else it writes the template's free pages: the
    written pages' plan, tested above, with as many more faults as the free memory's place
    moved). The pieces, and those added to the list yielded, are freed after."""
    lib = hygiene.libc()
    end, pieces = prefault.program_break(), [lib.malloc(prefault.HEAP_PIECE)]
    try:
        while pieces[-1] < end and len(pieces) < prefault.MAX_PAGES:
            pieces.append(lib.malloc(prefault.HEAP_PIECE))
        yield pieces
    finally:
        for piece in pieces:
            lib.free(piece)


def _ahead_and_not(handler: Any) -> tuple[list[Any], Any]:
    """Five calls of ``handler`` (each sleeping 0.3 s first) by a worker forked ahead, and
    one by a worker not forked ahead: their results."""
    ahead, plain = _worker(handler, ahead=True), _worker(handler)
    try:
        found = [ahead.call(0.3, {"x": 30}, "x") for _ in range(5)]
        unprepared = plain.call(0.3, {"x": 30}, "x")
    finally:
        ahead.stop()
        plain.stop()
    return found, unprepared


def _present(pid: int, mapped: mmap.mmap) -> int:
    """How many pages of ``mapped`` (this process's) the child ``pid`` has mapped, once it
    is done faulting in (its count steady for a tenth of a second)."""
    start = _address(mapped)
    counts = [-1]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        fd = os.open(f"/proc/{pid}/pagemap", os.O_RDONLY)
        try:
            raw = os.pread(fd, len(mapped) // prefault.PAGE * 8, start // prefault.PAGE * 8)
        finally:
            os.close(fd)
        entries = np.frombuffer(raw, dtype=np.uint64)
        counts.append(int(np.count_nonzero(entries & prefault.PRESENT)))
        if counts[-1] == counts[-2]:
            return counts[-1]
        time.sleep(0.1)
    return counts[-1]


def _address(mapped: mmap.mmap) -> int:
    """Where ``mapped`` starts in this process (its line in ``/proc/self/maps``)."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            if line.rstrip().endswith(_FILE.name):
                return int(line.split("-", 1)[0], 16)
    raise AssertionError(f"{_FILE.name} is not mapped")


def test_a_plan_holds_what_every_case_seen_touched_within_bounds() -> None:
    """What one case alone touched (a hostile one filling memory) is never faulted in
    ahead by the workers after it: the pages every case seen touched, the least heap."""
    page = prefault.PAGE
    seen = [prefault.Seen(frozenset({0, page, 5 * page}), frozenset({9 * page}), 3 << 20),
            prefault.Seen(frozenset({page, 2 * page, 5 * page}), frozenset(), 1 << 40)]
    plan = prefault.Plan.of(seen)
    assert plan == prefault.Plan(((page, page), (5 * page, page)), (), 3 << 20)
    assert prefault.Plan.of([seen[1], seen[1]]).heap == prefault.MAX_PAGES * page
    assert prefault.Plan.of([]) == prefault.NOTHING


@needs_scoping
def test_a_spare_whose_scheduling_a_case_changed_serves_no_case() -> None:
    """Call 2 renices its parent's other children: the spare forked for call 3 as call 2
    began. That spare exits before the call (REACHED); call 3 runs in a new child, with
    the template's niceness, and its notes say why."""
    handlers = {"renice": renice_siblings, "write": write_pages}
    worker = _worker(lambda request, report: handlers[request[0]](request[1], report),
                     ahead=True)
    try:
        worker.call(("write", 0), {"x": 30}, "x")  # a spare forked as it began
        assert len(worker._spares) == 1
        before = hygiene._children(os.getpid())
        assert worker.call(("renice", before), {"x": 30}, "x") >= 1
        _, _, niceness = worker.call(("write", 0), {"x": 30}, "x")
        notes = worker.notes
    finally:
        worker.stop()
    assert niceness == os.getpriority(os.PRIO_PROCESS, 0)
    assert any("scheduling was changed from outside while it waited" in n for n in notes)


@needs_scoping
def test_a_spare_born_with_a_scheduling_a_case_gave_the_template_serves_no_case(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The spare for the next call is forked while a call runs, whose processes may
    renice the template meanwhile, between its restoring and its fork: here the fork
    comes from a thread of the template reniced so (a thread's niceness is its own, and
    a fork's child inherits it), nothing restored. The spare, born reniced, is checked
    against the template's scheduling as it was when the call was sent: it serves no
    call; the next call runs in a new child, with the template's niceness, and its notes
    say why."""
    worker = _worker(write_pages, ahead=True)
    niceness = os.getpriority(os.PRIO_PROCESS, 0)

    forked, done = threading.Event(), threading.Event()

    def fork_reniced(settled: template.Reachable) -> None:
        os.setpriority(os.PRIO_PROCESS, 0, niceness + 5)  # this thread alone
        with monkeypatch.context() as patched:  # the renice came after the restoring
            patched.setattr(template, "restore", lambda baseline: [])
            worker._fork_ahead(settled)
        forked.set()
        done.wait(30)  # a child dies with the thread that forked it (PR_SET_PDEATHSIG)

    try:
        worker.call(0, {"x": 30}, "x")
        settled = template.take()  # as the next call would be sent
        worker._drop_spare()
        threading.Thread(target=fork_reniced, args=(settled,), daemon=True).start()
        assert forked.wait(30) and len(worker._spares) == 1
        _, _, found = worker.call(0, {"x": 30}, "x")
        notes = worker.notes
    finally:
        done.set()
        worker.stop()
    assert found == niceness
    assert any("scheduling was changed from outside" in n for n in notes), notes


@needs_scoping
def test_a_spare_forked_during_a_call_keeps_none_of_its_operands() -> None:
    """The spare forked as a call begins is a copy of the template in that call: it gives
    up the shared files the template had mapped (the call's operands), which would
    otherwise live as long as it waits (a case's inputs kept through the next case)."""
    operand = transfer.shared_empty((16 << 20,), np.uint8)  # a shared file, mapped here
    worker = _worker(lambda request, report: time.sleep(0.3) or len(request), ahead=True)
    try:
        assert worker.call(operand, {"x": 30}, "x") == operand.size
        with open(f"/proc/{worker._spares[0].pid}/maps") as maps:
            mapped = maps.read()
    finally:
        worker.stop()
    assert "pytest-xtc-array" not in mapped


def test_a_worker_is_forked_ahead_only_where_the_fence_scopes_signals(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(fence, "scopes_signals", lambda: False)
    worker = _worker(write_pages, ahead=True)
    try:
        worker.call(0, {"x": 30}, "x")
        assert not worker.ahead and len(worker._spares) == 1
    finally:
        worker.stop()


def test_a_deferred_workers_last_child_is_never_reused() -> None:
    """A host's worker (``defer_next``) kills its last child once the host's reply is out
    (``prepare_next``); a call coming before that still gets a new child."""
    worker = _worker(lambda request, report: os.getpid(), defer_next=True)
    try:
        first = worker.call(None, {"x": 30}, "x")
        assert worker.pid == first  # done, alive until the owner says its reply is out
        second = worker.call(None, {"x": 30}, "x")
        worker.prepare_next()
        third = worker.call(None, {"x": 30}, "x")
    finally:
        worker.stop()
    assert len({first, second, third}) == 3
    assert not os.path.exists(f"/proc/{first}/cmdline") or _dead(first)


def _dead(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")


@pytest.mark.parametrize(("workers", "cores", "free"), [(None, 2, True), (2, 2, False),
                                                       (2, 4, True), (None, 1, False)])
def test_a_core_is_free_for_workers_ahead_when_the_session_runs_fewer_workers(
    monkeypatch: pytest.MonkeyPatch, workers: int | None, cores: int, free: bool,
) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)))
    config = SimpleNamespace() if workers is None else \
        SimpleNamespace(workerinput={"workercount": workers})
    assert _free_core(config) is free  # type: ignore[arg-type]
