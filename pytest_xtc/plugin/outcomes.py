"""A case's run in pytest: the ``xtc_outcome`` fixture, then pass, skip, expected failure
or failure, with the command that reruns a case alone.

The fixture only prepares the case: its compilation and run happen in the test's call
(:func:`conclude`), so that ``--durations`` and JUnit XML count them as the test's time.
"""

from __future__ import annotations

import functools
import re
import shlex
from collections.abc import Callable, Generator
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

import pytest

from pytest_xtc.core.adapter import TargetAdapter, Tier
from pytest_xtc.core.cases import expectations, twins
from pytest_xtc.core.cases.case import Case
from pytest_xtc.core.cases.selectors import Traits
from pytest_xtc.core.execution.executors import interrupted
from pytest_xtc.core.execution.runner import run_case
from pytest_xtc.core.limits import DEFAULT_MAX_CASE_BYTES
from pytest_xtc.core.outcome import Outcome, Phase, Status
from pytest_xtc.core.workers import interrupts
from pytest_xtc.plugin import options, state
from pytest_xtc.plugin.benchmarking import benchmark_wanted, feed_benchmark
from pytest_xtc.report.render.text import visible
from pytest_xtc.report.replay import option_flags
from pytest_xtc.report.rules.waivers import Waiver, load_waivers

#: JUnit XML properties of each case (plain strings), besides the outcome itself.
PROPERTIES = ("target", "case", "seed", "status", "phase", "worst_ratio")


@dataclass
class PendingCase:
    """A case ready to run on a target: what the ``xtc_outcome`` fixture gives."""

    request: pytest.FixtureRequest
    adapter: TargetAdapter
    case: Case
    workdir: Path
    outcome: Outcome | None = None  # once run

    def run(self) -> Outcome:
        """Compile and run the case; record its outcome for reports and JUnit XML."""
        session = state.get(self.request.config)
        assert session is not None and session.settings is not None  # set at configure
        settings = session.settings
        adapter, after = session.next_case
        if adapter is self.adapter and twins.follows(self.case, after):
            settings = replace(settings, keep_worker=True)  # its twin runs next, in it
        try:
            outcome = run_case(self.adapter, self.case, self.workdir, settings)
        except pytest.fail.Exception as exc:  # a timeout plugin ended the case: no verdict
            outcome = interrupted(self.adapter, self.case, settings, str(exc))
            self._record(outcome)
            raise
        self._record(outcome)
        return outcome

    def _record(self, outcome: Outcome) -> None:
        self.outcome = outcome
        node = self.request.node
        values = outcome.to_dict()
        node.user_properties.append((state.OUTCOME_KEY, values))
        for name in PROPERTIES:
            if values.get(name) is not None:
                node.user_properties.append((f"xtc_{name}", visible(values[name])))
        node.user_properties.append(("xtc_rerun", visible(rerun_command(node))))
        if outcome.perf and outcome.times and benchmark_wanted(self.request.config):
            try:
                feed_benchmark(self.request, self.case, outcome)
            except Exception as exc:  # performance never decides conformance
                node.warn(pytest.PytestWarning(f"pytest-benchmark refused the times: {exc!r}"))


@pytest.fixture
def xtc_outcome(
    request: pytest.FixtureRequest, xtc_adapter: TargetAdapter, xtc_case: Case,
    tmp_path_factory: pytest.TempPathFactory,
) -> PendingCase:
    """The case on its target, run by :func:`conclude` in the test's call. Its work
    directory is made from ``tmp_path_factory`` as ``tmp_path`` makes one, without
    ``tmp_path``'s teardown: that reads a result pytest stores only once the setup is
    reported, so a Ctrl-C during a case's setup ended the session with a KeyError."""
    name = re.sub(r"\W", "_", request.node.name)[:30]
    return PendingCase(request, xtc_adapter, xtc_case, tmp_path_factory.mktemp(name))


@pytest.fixture
def xtc_verdict(
    request: pytest.FixtureRequest, xtc_adapter: TargetAdapter, xtc_outcome: PendingCase
) -> Callable[[], None]:
    """Runs the case and turns its outcome into the test's verdict, in the test's call."""
    return partial(conclude, request, xtc_adapter, xtc_outcome)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Note the case that runs next in this process: a case whose twin it is keeps its
    worker for it (``core/cases/twins.py``)."""
    session = state.get(item.config)
    if session is not None:
        params = getattr(getattr(nextitem, "callspec", None), "params", {})
        session.next_case = (params.get("xtc_adapter"), params.get("xtc_case"))


def pytest_keyboard_interrupt() -> None:
    """The session is ending for a Ctrl-C: no wait raises it again (interrupts.check)."""
    interrupts.taken()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """The call report keeps the outcome (reports and the summary read it there); the item
    then drops it, so that the teardown report, which JUnit XML prints, holds plain
    strings only."""
    report = yield
    if call.when == "call":
        item.user_properties[:] = [p for p in item.user_properties if p[0] != state.OUTCOME_KEY]
    return report


#: pytest's category, letter and word for a case compiled and inspected but not run.
COMPILED_STATUS = (Status.COMPILED.value, "c", ("COMPILED", {"cyan": True}))


@pytest.hookimpl(tryfirst=True)
def pytest_report_teststatus(
    report: pytest.TestReport, config: pytest.Config
) -> tuple[str, str, tuple[str, dict[str, bool]]] | None:
    """A case that passed on a compile-only tier reads ``compiled``, never ``passed``:
    in the progress line, ``-v`` and the final counts ("118 compiled"); the exit status
    stays 0."""
    if report.passed:
        outcome = state.reported_outcome(report)
        if outcome is not None and outcome.get("status") == Status.COMPILED.value:
            return COMPILED_STATUS
    return None


def _shown(path: Path, where: Path) -> str:
    """``path`` relative to ``where`` when inside it, else absolute."""
    path = path.resolve()
    try:
        return path.relative_to(where.resolve()).as_posix() or "."
    except ValueError:
        return str(path)


def _suite_arg(path: Path, where: Path) -> str:
    """The suite module as a pytest argument from ``where``: its path there when inside
    it (a checkout), else, and wherever it is installed, its package node id, which the
    plugin resolves to the installed module from any directory (never a path into a
    virtual environment)."""
    from pytest_xtc.plugin import collection

    shown = _shown(path, where)
    installed = collection._installed_in() is not None or bool(
        {"site-packages", "dist-packages"} & set(path.resolve().parts))
    return collection.PACKAGE_PATH if installed or Path(shown).is_absolute() else shown


def rerun_command(item: pytest.Item) -> str:
    """One command line that runs this case alone, exactly as this run did, pasted in the
    directory pytest ran from: its node id (the suite module's real path) and every
    option that changes a verdict."""
    config = item.config
    here = config.invocation_params.dir
    target = item.callspec.params["xtc_adapter"].name  # type: ignore[attr-defined]
    parts = ["pytest", f"{_suite_arg(item.path, here)}::{item.name}", f"--xtc-target={target}"]
    for dest, flag in options.VERDICT_OPTIONS:
        value = config.getoption(dest)
        if value is True:
            parts.append(flag)
        elif value is not False and value is not None and value != _DEFAULTS.get(dest):
            parts.append(f"{flag}={value}")
    parts += [f"--xtc-cases={_shown(Path(here, p), here)}" for p in config.getoption("xtc_cases")]
    parts += option_flags(options.adapter_settings(config))
    return shlex.join(parts)


_DEFAULTS: dict[str, object] = {
    "xtc_seed": None,  # always shown: the seed is part of the case's identity
    "xtc_repeat": options.DEFAULT_REPEAT,
    "xtc_number": options.DEFAULT_NUMBER,
    "xtc_min_repeat_ms": options.DEFAULT_MIN_REPEAT_MS,
    "xtc_max_case_bytes": DEFAULT_MAX_CASE_BYTES,
    "xtc_from_pack": None,
    "xtc_run_on": None,
}


def _expectation(
    request: pytest.FixtureRequest, adapter: TargetAdapter, case: Case | str, executed: bool
) -> expectations.Expectation | None:
    """The target's expected-failure entry covering ``case`` (by id pattern or by its
    properties, on the installed XTC version) in a run that ``executed`` it or not."""
    if request.config.getoption("xtc_ignore_expectations"):
        return None
    path = adapter.expectations_file()
    entries = expectations.load(path) if path is not None else ()
    return expectations.find(entries, case, executed=executed)


#: The user property naming the suite waiver that covers a failed case.
WAIVED_KEY = "xtc_waived"


@functools.cache
def _suite_waivers() -> tuple[Waiver, ...]:
    return tuple(load_waivers())


def _waiver(request: pytest.FixtureRequest, adapter: TargetAdapter, case: Case | str,
            outcome: Outcome) -> Waiver | None:
    """The suite's waiver covering this failed case, as report.json's verdicts find it."""
    if not isinstance(case, Case):
        return None
    try:
        waivers = _suite_waivers()
        xtc = adapter.status().versions.get("xtc-tools")
    except Exception:  # an unreadable waiver file is refused with --xtc-report
        return None
    traits = Traits.of(case)
    return next((w for w in waivers if w.matches(adapter.name, traits, xtc, outcome.phase)),
                None)


def conclude(
    request: pytest.FixtureRequest, adapter: TargetAdapter, outcome: Outcome | PendingCase
) -> None:
    """Run the case if it has not run yet, then turn its outcome into pytest's pass, skip,
    expected failure or failure."""
    if isinstance(outcome, PendingCase):
        outcome = outcome.run()
    params = getattr(getattr(request.node, "callspec", None), "params", {})
    case: Case | str = params.get("xtc_case", outcome.case)
    expected = None
    if outcome.status in (Status.PASSED, Status.COMPILED, Status.FAILED):
        executed = outcome.tier == Tier.EXECUTE.value
        expected = _expectation(request, adapter, case, executed)
    waiver = _waiver(request, adapter, case, outcome) if outcome.status is Status.FAILED else None
    if waiver is not None:  # every view says "waived" (report/rules/statuses.py)
        request.node.user_properties.append((WAIVED_KEY, waiver.id))
    if outcome.status in (Status.PASSED, Status.COMPILED):
        if expected is not None:
            what = "pass" if outcome.status is Status.PASSED else (
                "compile (compiled and its artifact checked; `executed: true` limits an "
                "entry to runs that execute)")
            pytest.fail(
                f"unexpected {what}: remove the entry {expected.pattern!r} "
                f"(line {expected.line}) from {adapter.expectations_file()}",
                pytrace=False,
            )
        return  # COMPILED: pytest's pass, shown as compiled (pytest_report_teststatus)
    if (
        outcome.status is Status.FAILED
        and expected is not None
        and expected.phase == Phase(outcome.phase).stage
    ):
        # pytrace=False: the reason alone, as pytest.fail(pytrace=False) gives (pytest.xfail
        # would format a traceback nobody reads: 34 ms an expected failure)
        raise pytest.xfail.Exception(visible(f"expected {expected.phase} failure: "
                                             f"{expected.reason} ({expected.url})"),
                                     pytrace=False)
    if waiver is not None:  # a failure the suite waives: not a failure of the run
        raise pytest.xfail.Exception(visible(f"waived by the suite ({waiver.id}): "
                                             f"{waiver.reason} ({waiver.url})"), pytrace=False)
    # Messages come from adapters and case files: shown on one line, controls escaped
    # (a message cannot forge a line of pytest's summary or move the cursor).
    message = visible(outcome.message)
    if outcome.status is Status.NOT_SUPPORTED:
        pytest.skip(f"not supported: {message}")
    if outcome.status is Status.SKIPPED:
        if request.config.getoption("xtc_strict"):
            pytest.fail(f"--xtc-strict: cannot run here: {message}", pytrace=False)
        pytest.skip(message)
    rerun = visible(rerun_command(request.node))
    if outcome.status is Status.INVALID:  # the message names it: the user's case, not the target
        pytest.fail(f"[{outcome.phase}] {message}\nrerun alone: {rerun}", pytrace=False)
    if outcome.status is Status.ERROR:
        pytest.fail(
            f"[infrastructure error, {outcome.phase}] {message}\nrerun alone: {rerun}",
            pytrace=False,
        )
    pytest.fail(f"[{outcome.phase}] {message}\nrerun alone: {rerun}", pytrace=False)

