"""Moving messages between processes: a reply (``sender`` given) is read only as its own
child's, its shared files only regular ones, opened without waiting."""

from __future__ import annotations

import os
import pickle
import time

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


def test_a_reply_naming_a_fifo_as_its_shared_file_is_refused_at_once() -> None:
    """Opened for reading the usual way, a FIFO with no writer waits forever."""
    read, write = os.pipe()
    os.close(write)
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
