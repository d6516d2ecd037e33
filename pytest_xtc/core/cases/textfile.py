"""Reading the suite's small input files safely: a size cap, UTF-8 or a clear refusal, and
one-line YAML errors. No pytest."""

from __future__ import annotations

from pathlib import Path


class UnreadableFile(ValueError):
    """A file that cannot be read as text; the message says why and what to do."""


def read_text(path: Path, limit: int) -> str:
    """``path``'s text, refused when larger than ``limit`` bytes or not UTF-8."""
    try:
        with path.open("rb") as file:
            raw = file.read(limit + 1)
    except OSError as exc:
        raise UnreadableFile(f"cannot read: {exc.strerror or exc}") from None
    if len(raw) > limit:
        raise UnreadableFile(f"larger than {limit >> 20} MiB")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UnreadableFile(
            f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start}); "
            "save the file as UTF-8"
        ) from None


def one_line(exc: BaseException) -> str:
    """An exception's message on one line (YAML errors span several)."""
    return " ".join(str(exc).split())
