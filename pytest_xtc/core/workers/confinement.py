"""A case writes only its own folder: entered by a case worker's child once its request
names the case's work folder, before any of the case's code runs (and inherited by every
process it starts).

- **A private temporary folder** inside the work folder (``TMPDIR``, ``TMP``, ``TEMP`` and
  ``tempfile.tempdir``): what a kernel, XTC or a compiler writes "to the temporary folder"
  lands there, and a kernel emptying "the temporary folder" empties its own.
- **A Landlock layer of file-system rules** (Linux 5.13 and later, Landlock ABI 1+): the
  process may create, write, truncate, rename or remove files only beneath its work folder
  (which holds its private temporary folder) and the folders it is given (``shared``: a
  device's lock folder), and write (never create) the device files under ``/dev`` (a
  GPU's, ``/dev/null``). POSIX shared memory (``/dev/shm``) stays writable: runtimes
  register themselves there (LLVM's OpenMP writes ``__KMP_REGISTERED_LIB_<pid>_<uid>``
  and, finding a dead process's file under its own pid, removes it: a removal refused
  there makes it retry forever, a hang charged to the kernel). Reading and executing
  stay allowed everywhere: XTC's wheels, the toolchains, the template's prepared files.
  Everything else the session owns is out of its reach: pytest's base temporary folder
  and the other cases' folders in it, the template's prepared folder, the report folder,
  the caches (the platform cache folder is read and written by the session's side
  alone), the user's home.

Landlock layers stack and only narrow: a child kept for a second case (the order check's
pair, twins: ``keep``) is confined first to the folder holding both cases' work folders,
then to the second case's own. Memory files (``memfd``, the operands' transfer) and pipes
lie in no folder and are not concerned. Where the kernel has no Landlock, the private
temporary folder alone is set (:func:`available` says why, once, for the run's header).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from pytest_xtc.core.workers import fence
from pytest_xtc.core.workers.hygiene import libc

#: The private temporary folder's name, inside the case's work folder.
PRIVATE_TMP = ".xtc-tmp"
#: POSIX shared memory: left writable (see the module's docstring).
SHARED_MEMORY = Path("/dev/shm")
_ADD_RULE, _PATH_BENEATH = 445, 1
_O_PATH = getattr(os, "O_PATH", 0)
# LANDLOCK_ACCESS_FS_*: what a write is (reading, listing and executing are not handled)
_WRITE_FILE, _REMOVE_DIR, _REMOVE_FILE = 1 << 1, 1 << 4, 1 << 5
_MAKES = sum(1 << bit for bit in range(6, 13))  # char, dir, reg, sock, fifo, block, sym
_REFER, _TRUNCATE = 1 << 13, 1 << 14  # ABI 2, ABI 3


class _PathBeneath(ctypes.Structure):  # struct landlock_path_beneath_attr (packed)
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _writes(abi: int) -> int:
    """Every write access this kernel's Landlock knows."""
    rights = _WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKES
    if abi >= 2:
        rights |= _REFER
    if abi >= 3:
        rights |= _TRUNCATE
    return rights


@functools.cache
def available() -> str | None:
    """None where a case's writes are confined to its folder here, else why not (one
    line, for the run's header)."""
    abi = fence.landlock_abi()
    if abi < 1:
        return ("cases are not confined to their folders: this kernel offers no Landlock "
                "(Linux 5.13 and later); each still gets a private temporary folder")
    return None


def private_tmp(workdir: Path) -> Path:
    """The case's private temporary folder, made now (mode 0700)."""
    folder = workdir / PRIVATE_TMP
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    return folder


def enter(workdir: Path, keep: bool = False, shared: Iterable[Path] = ()) -> str | None:
    """Confine this process (a case worker's child) to ``workdir`` (with ``keep``, to its
    parent folder as well: the kept child's next case works beside it) and ``shared``;
    point every temporary folder at the private one. None when done, else why the
    file-system rules are not in (the private temporary folder is set either way)."""
    workdir = Path(workdir).absolute()
    tmp = private_tmp(workdir)
    for name in ("TMPDIR", "TMP", "TEMP"):
        os.environ[name] = str(tmp)
    tempfile.tempdir = str(tmp)
    if available() is not None:
        return available()
    return _restrict([workdir.parent if keep else workdir, *shared])


def _restrict(writable: list[Path]) -> str | None:
    """A Landlock layer letting this process write beneath ``writable`` only (and into
    the device files under /dev); None when in, else why not."""
    abi = fence.landlock_abi()
    handled = _writes(abi)
    attr = fence.RulesetAttr(handled, 0, 0)
    ruleset = int(libc().syscall(ctypes.c_long(fence.CREATE_RULESET), ctypes.byref(attr),
                                 ctypes.c_long(ctypes.sizeof(attr)), ctypes.c_long(0)))
    if ruleset < 0:
        return f"no file-system rules: {os.strerror(ctypes.get_errno())}"
    try:
        for folder in writable:
            _allow(ruleset, folder, handled)
        _allow(ruleset, Path("/dev"), handled & (_WRITE_FILE | _TRUNCATE))
        _allow(ruleset, SHARED_MEMORY, handled)
        if libc().syscall(ctypes.c_long(fence.RESTRICT_SELF), ctypes.c_long(ruleset),
                          ctypes.c_long(0)) != 0:
            return f"no file-system rules: {os.strerror(ctypes.get_errno())}"
    finally:
        os.close(ruleset)
    return None


def _allow(ruleset: int, folder: Path, rights: int) -> None:
    """Add the rule "``rights`` beneath ``folder``" (a folder that is not there: none)."""
    try:
        fd = os.open(folder, _O_PATH | os.O_CLOEXEC)
    except OSError:
        return
    try:
        rule = _PathBeneath(rights, fd)
        with contextlib.suppress(OSError):
            libc().syscall(ctypes.c_long(_ADD_RULE), ctypes.c_long(ruleset),
                           ctypes.c_long(_PATH_BENEATH), ctypes.byref(rule), ctypes.c_long(0))
    finally:
        os.close(fd)
