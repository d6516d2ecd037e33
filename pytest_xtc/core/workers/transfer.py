"""Moving a request or a reply between the pytest process and a worker at memory speed.

A message is pickled with protocol 5, its arrays' bytes out of band. Small buffers go
through the pipe. A large one travels as a reference to an anonymous shared-memory file
(``memfd_create``: in no directory, so nothing can leak in /dev/shm) and an offset: when
the array already lies in such a file (made by :func:`shared_empty`, or received), nothing
is copied; otherwise its bytes are written once into a new file. Requests go down a
:func:`channel` (a Unix socket pair) that passes the files themselves along with their
frame (``SCM_RIGHTS``): a fenced worker may not open its parent's ``/proc/<pid>/fd``
(:mod:`fence`). A reply goes up a pipe, the parent opening ``/proc/<sender>/fd/<n>`` (a
parent may reach its descendants). The receiver maps the file copy-on-write (a kernel
writing into what it received never reaches the sender) and rebuilds the arrays as views
of it; it keeps its own descriptor, so it can pass the arrays on without a copy either.

Lifetimes: a file lives while an array maps it or a process holds its descriptor; the
sender keeps what it sent alive until the receiver has mapped it (the worker's first
phase report; the parent's acknowledgement of a result). Whatever dies, the kernel frees
the memory with the last mapping: no leak is possible. A child just forked gives up the
files its parent had mapped (:func:`drop_inherited`): a case's operands are never kept
alive by the worker forked while it runs.
"""

from __future__ import annotations

import contextlib
import fcntl
import mmap
import os
import pickle
import socket
import stat
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pytest_xtc.core.workers import unpickling
from pytest_xtc.core.workers.hygiene import libc

INLINE_MAX = 1 << 16  # out-of-band buffers below this (a pipe's capacity) go through it
#: The capacity asked for a worker's pipes (Linux's largest without privileges; 64 KiB
#: elsewhere): a frame of several inline buffers (a request of a 64x64x64 matmul is 83 KB)
#: goes in at once, its writer not waiting for the reader to drain the pipe.
PIPE_BYTES = 1 << 20
_CHUNK = 1 << 30  # bytes per write system call (Linux moves at most 2 GiB - 4 KiB)
MAX_FILES = 64  # shared files one message may pass along (SCM_RIGHTS takes 253)
_CLOEXEC = getattr(socket, "MSG_CMSG_CLOEXEC", 0)  # passed files closed by exec (Linux)
_segments: dict[int, tuple[int, int, int]] = {}  # start address: (end, fd, owner pid)
#: Shared files are made sealable, and a reply's are sealed against shrinking by their
#: reader before it maps them (Linux): a sender truncating one later cannot fault its reader.
_SEALABLE = getattr(os, "MFD_ALLOW_SEALING", 0)
_SHRINK = getattr(fcntl, "F_SEAL_SHRINK", 0) if hasattr(fcntl, "F_ADD_SEALS") else 0
_PROT_NONE, _FIXED_NORESERVE = 0, 0x10 | 0x4000  # Linux's values (memfds: Linux alone)


def pipe() -> tuple[int, int]:
    """``os.pipe()``, enlarged to :data:`PIPE_BYTES` where the system allows it."""
    read, write = os.pipe()
    with contextlib.suppress(AttributeError, OSError):  # F_SETPIPE_SZ: Linux only
        fcntl.fcntl(write, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    return read, write


def channel() -> tuple[int, int]:
    """A request channel (its read end, its write end): a Unix stream socket pair, which
    passes the shared files a frame refers to (:func:`send`, :func:`receive`)."""
    reader, writer = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with contextlib.suppress(OSError):
        writer.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, PIPE_BYTES)
    return reader.detach(), writer.detach()


def shared_memory_available() -> bool:
    return hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd")


@dataclass
class Packed:
    """A message ready to send: ``frame`` goes through the pipe; ``fd`` (or -1) is a file
    written for it, and ``keep`` what it refers to, both held until the receiver has it;
    ``files``: the shared files the frame refers to, in order (passed along by a channel)."""

    frame: bytes
    fd: int = -1
    keep: Any = None
    files: tuple[int, ...] = ()

    def close(self) -> None:
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1
        self.keep = None


def shared_empty(shape: Sequence[int], dtype: Any) -> np.ndarray:
    """An uninitialised array in a shared-memory file, sent without a copy (np.empty
    where there is no memfd or for small arrays)."""
    dtype = np.dtype(dtype)
    size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if size < INLINE_MAX or not shared_memory_available():
        return np.empty(tuple(shape), dtype)
    fd = os.memfd_create("pytest-xtc-array", os.MFD_CLOEXEC | _SEALABLE)
    try:
        os.ftruncate(fd, size)
    except BaseException:
        os.close(fd)
        raise
    segment = _map(fd, size, mmap.MAP_SHARED)
    return np.frombuffer(segment, dtype=dtype, count=size // dtype.itemsize).reshape(shape)


def _map(fd: int, size: int, flags: int) -> mmap.mmap:
    """Map ``fd`` and register it; ``fd`` is closed with the mapping (or on failure)."""
    try:
        segment = mmap.mmap(fd, size, flags=flags, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    except BaseException:
        os.close(fd)
        raise
    start = np.frombuffer(segment, dtype=np.uint8).ctypes.data
    _segments[start] = (start + size, fd, os.getpid())
    weakref.finalize(segment, _forget, start, fd)
    return segment


def drop_inherited() -> None:
    """In a child just forked (its descriptors closed): unmap the shared files its parent
    had mapped, the operands of the parent's calls, which the child never uses; each
    range stays reserved, inaccessible, so that nothing else is mapped where an object of
    the parent's still points."""
    me = os.getpid()
    for start, (end, _, owner) in list(_segments.items()):
        if owner != me:
            libc().mmap(start, end - start, _PROT_NONE,
                        mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _FIXED_NORESERVE, -1, 0)
            del _segments[start]


def _forget(start: int, fd: int) -> None:
    if _segments.pop(start, None) is not None:
        with contextlib.suppress(OSError):
            os.close(fd)


def _locate(view: memoryview) -> tuple[int, int] | None:
    """(fd, offset) of a buffer lying in a shared file of this process, else None."""
    if not _segments:
        return None
    address = np.frombuffer(view, dtype=np.uint8).ctypes.data
    me = os.getpid()
    for start, (end, fd, owner) in _segments.items():
        if owner == me and start <= address and address + view.nbytes <= end:
            return fd, address - start
    return None


def pack(message: Any) -> Packed:
    """``message`` as a frame; its large buffers by reference to shared files."""
    buffers: list[pickle.PickleBuffer] = []

    def out_of_band(buffer: pickle.PickleBuffer) -> bool:
        if buffer.raw().nbytes < INLINE_MAX or not shared_memory_available():
            return True  # in band
        buffers.append(buffer)
        return False

    data = pickle.dumps(message, protocol=5, buffer_callback=out_of_band)
    parts: list[tuple[int, int, int]] = []  # (index in files, offset, size)
    files: list[int] = []
    copies = [(b, b.raw()) for b in buffers if _locate(b.raw()) is None]
    written = _write(copies) if copies else -1
    offset = 0
    for buffer in buffers:
        view = buffer.raw()
        where = _locate(view)
        if where is None:
            where, offset = (written, offset), offset + view.nbytes
        if where[0] not in files:
            files.append(where[0])
        parts.append((files.index(where[0]), where[1], view.nbytes))
    if len(files) > MAX_FILES:
        raise ValueError(f"a message refers to {len(files)} shared files (at most "
                         f"{MAX_FILES})")
    frame = pickle.dumps((data, parts, os.getpid(), files), protocol=5)
    return Packed(frame, written, buffers, tuple(files))


def _write(copies: list[tuple[pickle.PickleBuffer, memoryview]]) -> int:
    """A new shared file holding the buffers' bytes, one after the other."""
    fd = os.memfd_create("pytest-xtc-transfer", os.MFD_CLOEXEC | _SEALABLE)
    try:
        os.ftruncate(fd, sum(view.nbytes for _, view in copies))
        offset = 0
        for _, view in copies:
            done = 0
            while done < view.nbytes:
                done += os.pwrite(fd, view[done : done + _CHUNK], offset + done)
            offset += view.nbytes
    except BaseException:
        os.close(fd)
        raise
    return fd


def unpack(frame: bytes, passed: Sequence[int] = (), sender: int = 0) -> Any:
    """The message a frame from :func:`pack` holds (while its sender still keeps it). Its
    shared files are ``passed`` (received with it, taken over here), else opened through
    ``/proc/<sender>/fd``. ``sender``: the child that sent a reply, whose bytes are not
    believed (:mod:`unpickling`: only a reply's kinds of value; the files its own, regular
    ones); raises :class:`~unpickling.Unreadable` for anything else."""
    if not sender:
        data, parts, pid, files = pickle.loads(frame)
    else:
        data, parts, pid, files = _checked_head(unpickling.loads_plain(frame), sender)
    if len(passed) != len(files):  # none passed (a pipe), or a frame not sent so
        for fd in passed:
            os.close(fd)
        opened: list[int] = []
        try:
            for fd in files:
                opened.append(_open_checked(pid, fd) if sender else
                              os.open(f"/proc/{pid}/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC))
        except BaseException:
            for fd in opened:
                os.close(fd)
            raise
        passed = opened
    mapped: list[memoryview] = []
    for n, fd in enumerate(passed):
        try:
            mapped.append(memoryview(_map(fd, os.fstat(fd).st_size, mmap.MAP_PRIVATE)))
        except BaseException:  # _map closes the file it fails on; close those after it
            for later in passed[n + 1 :]:
                os.close(later)
            raise
    views = [mapped[index][offset : offset + size] for index, offset, size in parts]
    if sender:
        return unpickling.loads(data, buffers=views)
    return pickle.loads(data, buffers=views)


def _checked_head(head: Any, sender: int) -> tuple[bytes, list[Any], int, list[int]]:
    """A reply's outer frame, checked: its own process, plain numbers."""
    try:
        data, parts, pid, files = head
        ok = (isinstance(data, bytes) and pid == sender and len(files) <= MAX_FILES
              and all(type(f) is int for f in files)
              and all(len(p) == 3 and all(type(v) is int for v in p) for p in parts))
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise unpickling.Unreadable(f"not a reply of process {sender} (its frame names "
                                    "another process or is not one)")
    return data, list(parts), pid, list(files)


def _open_checked(pid: int, fd: int) -> int:
    """A reply's shared file ``fd`` of its sender ``pid``, opened here: only a regular file
    (a memfd), opened without waiting (a FIFO named so would block) and writable (sealing
    asks it), sealed against shrinking before it is mapped."""
    try:
        opened = os.open(f"/proc/{pid}/fd/{fd}", os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise unpickling.Unreadable(f"names a file it does not hold ({exc.strerror})") from None
    if not stat.S_ISREG(os.fstat(opened).st_mode):
        os.close(opened)
        raise unpickling.Unreadable("names a file that is not shared memory")
    if _SHRINK:
        try:  # mapped here, a file its sender shrank later would kill this process (SIGBUS)
            fcntl.fcntl(opened, fcntl.F_ADD_SEALS, _SHRINK)
        except OSError:
            os.close(opened)
            raise unpickling.Unreadable("names a shared file its sender could still shrink "
                                        "(not made sealable)") from None
    return opened


def _write_all(fd: int, view: memoryview) -> None:
    while view:
        view = view[os.write(fd, view) :]


def write_frame(fd: int, data: bytes) -> None:
    """``data`` with its length in front."""
    _write_all(fd, memoryview(len(data).to_bytes(8, "little") + data))


def send(fd: int, packed: Packed) -> None:
    """``packed``'s frame down a :func:`channel`, the shared files it refers to passed
    along with its first bytes."""
    if not packed.files:
        write_frame(fd, packed.frame)
        return
    data = len(packed.frame).to_bytes(8, "little") + packed.frame
    sock = socket.socket(fileno=fd)
    try:
        done = socket.send_fds(sock, [data[:8]], list(packed.files))
    finally:
        sock.detach()
    _write_all(fd, memoryview(data)[done:])


def _read_exactly(fd: int, size: int) -> bytes | None:
    data = bytearray(size)
    view, done = memoryview(data), 0
    while done < size:
        got = os.readv(fd, [view[done:]])
        if not got:
            return None
        done += got
    return bytes(data)


def receive(fd: int) -> tuple[bytes, list[int]] | None:
    """The next frame from a :func:`channel` and the files passed with it (this process's
    descriptors now); None when the writer is gone."""
    sock = socket.socket(fileno=fd)
    try:
        first, files, _, _ = socket.recv_fds(sock, 8, MAX_FILES, _CLOEXEC)
    finally:
        sock.detach()
    for each in files:  # where MSG_CMSG_CLOEXEC is missing (not Linux)
        os.set_inheritable(each, False)
    rest = _read_exactly(fd, 8 - len(first)) if first else None
    body = None if rest is None else _read_exactly(fd, int.from_bytes(first + rest, "little"))
    if body is None:
        for each in files:
            os.close(each)
        return None
    return body, files
