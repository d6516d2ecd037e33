"""The pytest side of result bundles: ``--xtc-report=DIR``.

Only the controller writes (under pytest-xdist, workers have ``config.workerinput`` and
their reports reach the controller with the outcomes in ``user_properties``). The bundle
format, verdicts and checks live in the pytest-free :mod:`pytest_xtc.report.bundle`.
"""

from __future__ import annotations

import datetime
import os
import shlex
import shutil
import sys
import tempfile
import time
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pytest_xtc import SUITE_VERSION
from pytest_xtc.core.adapter import Tier
from pytest_xtc.core.adapters import registry
from pytest_xtc.core.cases.identity import test_id
from pytest_xtc.plugin import compile_cache, options, state
from pytest_xtc.plugin.bundle_guard import interrupts_deferred, writer_lock
from pytest_xtc.plugin.run_filters import run_filters
from pytest_xtc.report import bundle
from pytest_xtc.report.parts.environment import adapter_distribution, suite_source, system_info
from pytest_xtc.report.parts.facts import AdapterRecord, CapabilitiesRecord
from pytest_xtc.report.parts.model import (
    Command,
    Report,
    Run,
    Settings,
    Shards,
    Suite,
    Target,
    TargetCaseSet,
)
from pytest_xtc.report.parts.records import RESULTS, CaseRecord, ResultsWriter, clean
from pytest_xtc.report.render.text import visible
from pytest_xtc.report.rules import caseset
from pytest_xtc.report.rules.profiles import PROFILES
from pytest_xtc.report.rules.verdicts import assemble_report, run_not_certifying
from pytest_xtc.report.rules.waivers import WaiverFileError, load_waivers

#: pytest's exit status when the bundle could not be written (the cases' own results
#: stand in the terminal; an unwritten bundle must not pass for a finished one).
WRITE_FAILED = pytest.ExitCode.INTERNAL_ERROR


def configure(config: pytest.Config) -> None:
    """Register the bundle writer (the controller only: xdist workers send their reports)."""
    where = config.getoption("xtc_report")
    if hasattr(config, "workerinput"):
        return
    if not where:
        _job_summary_only(config)
        return
    path = config.invocation_params.dir / where
    try:
        bundle.check_destination(path)
        waivers = load_waivers()
    except (bundle.BundleError, WaiverFileError) as exc:
        raise pytest.UsageError(f"--xtc-report: {exc}") from None
    lock = writer_lock(path)
    config.add_cleanup(lock.release)
    config.pluginmanager.register(Reporter(config, path, waivers), "xtc-report")


def _job_summary_only(config: pytest.Config) -> None:
    """Without --xtc-report, where $GITHUB_STEP_SUMMARY is set: the report assembled in a
    temporary bundle, for the job summary, then removed."""
    from pytest_xtc.report.step_summary import VARIABLE

    if not os.environ.get(VARIABLE):
        return
    try:
        waivers = load_waivers()
    except WaiverFileError as exc:
        raise pytest.UsageError(f"${VARIABLE}: {exc}") from None
    path = Path(tempfile.mkdtemp(prefix="xtc-job-summary-")) / "bundle"
    config.pluginmanager.register(Reporter(config, path, waivers, kept=False), "xtc-report")


def _param_id(nodeid: str) -> str:
    return nodeid[nodeid.index("[") + 1 : -1] if nodeid.endswith("]") and "[" in nodeid else ""


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


class Reporter:
    """Streams results.jsonl during the run and writes the rest of the bundle at its end."""

    def __init__(self, config: pytest.Config, path: Path, waivers: list[Any],
                 kept: bool = True) -> None:
        self.config, self.path, self.waivers = config, path, waivers
        self.kept = kept  # False: a temporary bundle for $GITHUB_STEP_SUMMARY only
        self.records: list[CaseRecord] = []
        self.done: set[str] = set()
        self.setup_s: dict[str, float] = {}
        self.keys: dict[str, tuple[str, str]] = {}  # "<target>-<case id>" -> (target, case)
        self.targets: dict[str, Target] = {}
        self.collected: set[str] | None = None
        self.writer: ResultsWriter | None = None
        self.report: Report | None = None
        self.failure: bundle.WriteError | None = None  # the bundle could not be written
        self.started, self.clock = _now(), time.monotonic()

    # -- the run ----------------------------------------------------------------------

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        try:
            bundle.prepare(self.path)
        except (bundle.BundleError, OSError) as exc:
            raise pytest.UsageError(f"--xtc-report: {exc}") from None
        self.targets = self._targets()
        try:
            self.writer = ResultsWriter(self.path)
        except OSError as exc:
            self.failure = bundle.WriteError(self.path / RESULTS, exc)

    def _targets(self) -> dict[str, Target]:
        shard = self.config.getoption("xtc_shard")
        shards = None
        if shard:
            index, count = caseset.parse_shard(shard)
            shards = Shards(count=count, indices=(index,))
        session = state.get(self.config)
        assert session is not None
        pack = self.config.getoption("xtc_from_pack", None)  # the kernels ran where it ran
        targets = {}
        for adapter in session.adapters:
            probe = adapter.status()
            capabilities: CapabilitiesRecord | None
            try:
                caps = adapter.capabilities()
                capabilities = {
                    "ops": sorted(caps.ops), "dtypes": sorted(caps.dtypes),
                    "placements": sorted(caps.placements),
                    "schedules": None if caps.schedules is None else sorted(caps.schedules),
                }
            except Exception:  # the cases report the broken adapter
                capabilities = None
            placements = capabilities["placements"] if capabilities else []
            mine = session.suite_cases(adapter)
            self.keys.update({test_id(adapter.name, c.id): (adapter.name, c.id) for c in mine})
            case_set = caseset.target_case_set([caseset.case_entry(c) for c in mine])
            base = registry.parse(adapter.name)[0].base
            adapter_record: AdapterRecord = {**adapter_distribution(base),
                                             "options": options.adapter_settings(self.config)}
            tier, device = probe.tier.value, probe.device
            if pack:
                tier, device = Tier.EXECUTE.value, _pack_machine(pack, device)
            targets[adapter.name] = Target(
                tier=tier, reason=str(probe.reason or ""),
                versions=dict(probe.versions), device=device,
                placements=tuple(placements), capabilities=capabilities,
                adapter=adapter_record, runs=(0,), shards=shards,
                case_set=TargetCaseSet.from_dict(clean(case_set), f"{adapter.name} case set"),
                present=frozenset({"adapter"}),
            )
        return targets

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.collected = {item.nodeid for item in session.items}

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self.collected = (self.collected or set()) | set(ids)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.writer is None or report.nodeid in self.done or report.when == "teardown":
            return
        if report.when == "setup" and report.passed:
            self.setup_s[report.nodeid] = report.duration  # the case runs in its fixture
            return
        outcome = state.reported_outcome(report)
        key = self.keys.get(_param_id(report.nodeid))
        if outcome is not None:
            record: dict[str, Any] = dict(outcome)
        elif key is not None and (report.failed or report.skipped):
            # The case ended without an outcome (a setup error, a timeout...). An error
            # in pytest's own set-up (its temporary folder gone, a full disk, a fixture)
            # is the machinery's: an infrastructure error, never the target's failure.
            status = "skipped" if report.skipped else \
                "error" if report.when == "setup" else "failed"
            message = str(report.longreprtext).strip().splitlines()[-1:] or [""]
            record = {
                "target": key[0],
                "case": key[1],
                "status": status,
                "phase": f"pytest-{report.when}",
                "message": message[0][:500],
            }
        else:
            return
        pytest_outcome: str
        if report.when == "call":
            xfailed = report.skipped and hasattr(report, "wasxfail")
            pytest_outcome = "xfailed" if xfailed else report.outcome
            if report.passed and record.get("status") == "compiled":
                pytest_outcome = "compiled"  # the terminal's word: compiled, not run
        else:
            pytest_outcome = "error" if report.failed else "skipped"
        record.update(
            nodeid=report.nodeid,
            pytest_outcome=pytest_outcome,
            duration=round(report.duration + self.setup_s.pop(report.nodeid, 0.0), 6),
        )
        case = CaseRecord.from_dict(clean(record), f"{RESULTS}: {report.nodeid}:")
        self.done.add(report.nodeid)
        self.records.append(case)
        if self.failure is None:
            try:
                self.writer.write(case)
            except OSError as exc:  # the cases run on; the bundle stops here
                self.failure = bundle.WriteError(self.path / RESULTS, exc)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.writer is None and self.failure is None:
            return
        if self.writer is not None:
            self.writer.close()
        received: list[int] = []
        if self.failure is None:
            with interrupts_deferred() as received:
                report = assemble_report(self._report(session, int(exitstatus)), self.records)
                try:
                    bundle.finish(self.path, report)
                    self.report = report
                except bundle.WriteError as exc:
                    self.failure = exc
            if self.failure is None and self.report is not None:
                self._step_summary(self.report)
        if not self.kept:  # a bundle only for the job summary: not left behind
            shutil.rmtree(self.path.parent, ignore_errors=True)
        if received:
            session.config.get_terminal_writer().line(
                "Ctrl-C came while the bundle was written: it was finished first, whole"
            )
        if self.failure is not None:
            if session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
                session.exitstatus = WRITE_FAILED
            if not self.config.pluginmanager.has_plugin("terminalreporter"):
                print(self.failure_line(), file=sys.stderr)

    def _step_summary(self, report: Report) -> None:
        """The report's job summary into $GITHUB_STEP_SUMMARY, when set."""
        from pytest_xtc.report import step_summary

        try:
            step_summary.append(report)
        except OSError as exc:
            warnings.warn(f"xtc report: ${step_summary.VARIABLE} not written: "
                          f"{exc.strerror or exc}", stacklevel=1)

    def failure_line(self) -> str:
        assert self.failure is not None
        written = self.writer.written if self.writer is not None else 0
        flag = shlex.quote(f"--xtc-report={self.config.getoption('xtc_report')}")
        text = bundle.failure_text(self.failure, written, len(self.records), flag)
        return visible(f"xtc report: {text}")

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.failure is not None:
            terminalreporter.write_line(self.failure_line(), red=True, bold=True)
        if self.report is None or not self.kept:
            return
        terminalreporter.write_sep("-", visible(f"XTC report: {self.path}"))
        for name, entry in self.report.targets.items():
            verdicts = ", ".join(f"{p} {entry.verdict(p).verdict.value}" for p in PROFILES)
            terminalreporter.write_line(visible(f"{name}: {verdicts}"))
        if not self.report.certifies:
            terminalreporter.write_line(visible(
                "this bundle does not certify: " + "; ".join(self.report.not_certifying or ())
            ))

    # -- the report -------------------------------------------------------------------

    def _report(self, session: pytest.Session, exitstatus: int) -> Report:
        interrupted = ""
        if exitstatus == pytest.ExitCode.INTERRUPTED:
            interrupted = "KeyboardInterrupt"
        elif session.shouldstop or session.shouldfail:
            interrupted = str(session.shouldstop or session.shouldfail)
        params = self.config.invocation_params
        run = Run(
            command=Command(argv=tuple(sys.argv), args=tuple(params.args), dir=str(params.dir)),
            started=self.started, finished=_now(),
            duration_s=round(time.monotonic() - self.clock, 3),
            suite_source=suite_source(), system=system_info(self.targets),
            settings=self._settings(),
            filters=tuple(run_filters(self.config, set(self.keys), self.collected)),
            exit_status=exitstatus, interrupted=interrupted,
            collected=None if self.collected is None else len(self.collected),
        )
        certifying = not run_not_certifying(run, SUITE_VERSION)
        run = replace(run, settings=replace(run.settings, certifying=certifying))
        return Report(
            schema=bundle.SCHEMA,
            kind=bundle.KIND,
            suite=Suite(name="pytest-xtc", version=SUITE_VERSION, coverage=_coverage()),
            waivers=tuple(w.to_dict() for w in self.waivers),
            runs=(run,),
            targets=self.targets,
            present=frozenset(),
        )

    def _settings(self) -> Settings:
        option = self.config.option
        return Settings(
            targets=options.selection(self.config)[0],
            seed=option.xtc_seed,
            strict=option.xtc_strict,
            ignore_expectations=option.xtc_ignore_expectations,
            cases=tuple(option.xtc_cases or ()),
            adapter_options=options.adapter_settings(self.config),
            suite_version=SUITE_VERSION,
            target_versions={n: e.versions for n, e in self.targets.items()},
            shard=option.xtc_shard,
            workers=getattr(option, "numprocesses", None),
            compile_cache=compile_cache.mode(self.config),
        )


def _coverage() -> dict[str, Any]:
    """What the catalog's cases cover of each op's parameters (conformance/coverage.py)."""
    from pytest_xtc.conformance import coverage_table

    return {family: c.to_dict() for family, c in coverage_table().items()}


def _pack_machine(pack: str, here: str | None) -> str:
    """The device column of a session judging a pack: where its runner ran, as it says."""
    from pytest_xtc.core.execution import packed

    return f"{here or 'this machine'}: judged here; kernels run by the pack's device runner " \
           f"({packed.opened(pack).machine()})"
