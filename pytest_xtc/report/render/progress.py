"""Progress of long command-line runs (``xtc-conformance run``, ``selftest``): how many
of how many, the time so far and an estimate of the time left, on a terminal only.

Where the stream is not a terminal (CI logs, pipes, files) or ``CI`` is set, nothing is
written: logs keep only the results. On a terminal, one line at most every ``every``
seconds. The estimate is the mean time per unit so far times the units left. No pytest:
:class:`PytestProgress` holds hook methods that pytest finds by their names.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from pytest_xtc.report.render.text import visible


def wanted(stream: TextIO) -> bool:
    """Progress is shown on an interactive terminal, outside CI."""
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and not os.environ.get("CI")


def duration(seconds: float) -> str:
    """``75`` -> ``1 min 15 s``; ``3700`` -> ``1 h 2 min``."""
    seconds = max(0, round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes} min"
    return f"{minutes} min {secs} s" if minutes else f"{secs} s"


def line(what: str, done: int, total: int, elapsed: float) -> str:
    """``"cases: 120 of 648, 1 min 10 s, about 5 min 8 s left"``."""
    text = f"{what}: {done} of {total}, {duration(elapsed)}"
    if 0 < done < total:
        text += f", about {duration(elapsed / done * (total - done))} left"
    return text


class Progress:
    """Counts units done of ``total`` and writes a progress line now and then."""

    def __init__(self, what: str, total: int, stream: TextIO | None = None,
                 every: float = 10.0, clock: Callable[[], float] = time.monotonic,
                 enabled: bool | None = None) -> None:
        self.what, self.total, self.done = what, total, 0
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = wanted(self.stream) if enabled is None else enabled
        self.every, self.clock = every, clock
        self.start = self.last = clock()

    def advance(self, units: int = 1, note: str = "") -> None:
        self.done += units
        now = self.clock()
        if not self.enabled or now - self.last < self.every:
            return
        self.last = now
        text = line(self.what, self.done, self.total, now - self.start)
        self.stream.write(visible(text + (f" ({note})" if note else "")) + "\n")
        self.stream.flush()


class PytestProgress:
    """A pytest plugin object for ``xtc-conformance run``: one line of progress now and
    then, through the terminal reporter, on a terminal only (xdist or not)."""

    def __init__(self, every: float = 15.0) -> None:
        self.progress: Progress | None = None
        self.every = every

    def _begin(self, total: int, config: Any) -> None:
        if self.progress is None and total:
            writer = config.pluginmanager.get_plugin("terminalreporter")
            stream = getattr(writer, "_tw", None)
            self.progress = Progress("cases", total, every=self.every,
                                     enabled=wanted(sys.stdout) and stream is not None)
            self.progress.stream = _Lines(writer) if writer is not None else sys.stdout

    def pytest_collection_finish(self, session: Any) -> None:
        self._begin(len(session.items), session.config)

    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self._begin(len(ids), node.config)

    def pytest_runtest_logreport(self, report: Any) -> None:
        if self.progress is not None and (report.when == "call" or (
                report.when == "setup" and not report.passed)):
            self.progress.advance()


class _Lines:
    """The terminal reporter as a stream of whole lines (after pytest's own output)."""

    def __init__(self, reporter: Any) -> None:
        self.reporter = reporter

    def write(self, text: str) -> None:
        self.reporter.ensure_newline()
        self.reporter.write_line(text.rstrip("\n"))

    def flush(self) -> None:
        pass
