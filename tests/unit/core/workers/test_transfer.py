"""Moving messages between processes: a reply (``sender`` given) is read only as its own
child's, its shared files only regular ones, opened without waiting."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from pytest_xtc.core.workers import transfer, unpickling


def test_a_reply_with_a_large_array_comes_through_shared_memory() -> None:
    array = np.arange(1 << 16, dtype=np.float64)
    packed = transfer.pack({"out": array})
    try:
        found = transfer.unpack(packed.frame, sender=os.getpid())
    finally:
        packed.close()
    assert packed.fd >= 0 or packed.files  # by reference, not in the frame
    np.testing.assert_array_equal(found["out"], array)


def test_a_reply_naming_another_process_is_refused() -> None:
    packed = transfer.pack(np.arange(1 << 16, dtype=np.float64))
    try:
        with pytest.raises(unpickling.Unreadable, match="another process"):
            transfer.unpack(packed.frame, sender=os.getpid() + 1)
    finally:
        packed.close()


def test_a_reply_naming_a_fifo_as_its_shared_file_is_refused_at_once(tmp_path: Path) -> None:
    """Opened for reading the usual way (through ``/proc/<sender>/fd``), a named FIFO with
    no writer waits forever: the reader, a host or pytest, hung."""
    os.mkfifo(tmp_path / "fifo")
    read = os.open(tmp_path / "fifo", os.O_RDONLY | os.O_NONBLOCK)
    frame = pickle.dumps((pickle.dumps(None), [(0, 0, 1)], os.getpid(), [read]))
    start = time.monotonic()
    try:
        with pytest.raises(unpickling.Unreadable, match="not shared memory"):
            transfer.unpack(frame, sender=os.getpid())
    finally:
        os.close(read)
    assert time.monotonic() - start < 2


def test_a_frame_that_is_not_one_is_refused() -> None:
    with pytest.raises(unpickling.Unreadable):
        transfer.unpack(pickle.dumps(("a", "b")), sender=os.getpid())


SHRINKS_LATER = """
import os, threading, time
import numpy as np
from pytest_xtc.core.workers import isolation, transfer

def handler(request, report):
    out = transfer.shared_empty((1 << 20,), np.float64)
    out[:] = 1.0

    def shrink(keep=out):  # after the reply: every file this process holds, emptied
        time.sleep(0.3)
        for name in os.listdir("/proc/self/fd"):
            try:
                os.ftruncate(int(name), 0)
            except OSError:
                pass

    threading.Thread(target=shrink, daemon=True).start()
    return out

worker = isolation.Worker(handler, clean=False)  # kept after its reply, as a host is
array = worker.call(None, {"run": 60.0}, "run")
time.sleep(1.0)
print(float(array.sum()))
worker.stop()
"""


def test_a_reply_its_sender_shrinks_later_cannot_fault_its_reader() -> None:
    """The reader maps a reply's shared file; its sender, still alive (a host, whose
    adapter's code may leave a thread), emptying it afterwards killed the reader with
    SIGBUS at its next read: pytest, reading a host's reply. The reader now seals the file
    against shrinking before it maps it."""
    done = subprocess.run([sys.executable, "-c", SHRINKS_LATER], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.split()[-1] == str(float(1 << 20))
