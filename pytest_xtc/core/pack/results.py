"""Reading a pack's results back, refusing what does not belong to it. No pytest, no XTC.

Whole-pack problems raise :class:`~pytest_xtc.core.pack.writer.PackError` (the session stops,
saying what to do): no manifest, a pack file that is not the one the manifest names, no
``run.json`` (the runner did not finish), results naming another pack or another runner
version, a runner that ran none of the pack's cases. A case's own problems raise
:class:`Refused` (that case is an error, never judged): no result, a result whose digest
is not the one ``run.json`` gives (edited, truncated), a result of another case or another
call protocol, an output file missing, edited, unreadable or of the wrong shape or dtype.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pytest_xtc.core.cases.unique_keys import DuplicateKey, loads_json
from pytest_xtc.core.pack import device_runner as runner
from pytest_xtc.core.pack.writer import RUNNER, PackError, case_key

Json = dict[str, Any]


class Refused(Exception):
    """This case's result does not belong to the pack; the message says how."""


@dataclass
class RunCall:
    outputs: list[np.ndarray]
    inputs_left: list[np.ndarray | None]
    guard: list[str]
    times: list[float]
    wall_s: float


@dataclass
class CaseResult:
    status: str  # ok, error, timeout, signal, exit
    phase: str
    error: str = ""
    detail: str = ""  # the signal's name, the exit code, the exception's type
    infrastructure: bool = False  # the machine's failure (runtime, driver), not the kernel's
    calls: list[RunCall] = field(default_factory=list)


def _json(path: Path, what: str) -> Json:
    try:
        value = loads_json(path.read_text(), str(path))
    except DuplicateKey as exc:  # the runner writes none: the file was altered
        raise PackError(f"{path}:{exc.line}: key {exc.key!r} given twice in {what} (readers "
                        "disagree on which value counts); run the pack again") from None
    except (OSError, ValueError) as exc:
        raise PackError(f"{path}: {what} unreadable ({exc})") from None
    if not isinstance(value, dict):
        raise PackError(f"{path}: {what} is not a JSON object")
    return value


class PackResults:
    """A pack and the results its runner wrote, checked as a whole."""

    def __init__(self, pack: Path, results: Path | None = None) -> None:
        self.pack, self.results = pack, results or pack / "results"
        try:
            self.manifest, self.pack_id = runner.read_manifest(pack)
        except runner.PackProblem as exc:
            raise PackError(f"--xtc-from-pack={pack}: {exc}") from None
        run_file = self.results / runner.RUN
        if not run_file.is_file():
            raise PackError(f"--xtc-from-pack={pack}: no {run_file} (run the pack first: "
                            f"python3 {pack / RUNNER / 'device_runner.py'} {pack})")
        self.run = run = _json(run_file, "the runner's record")
        if run.get("pack_id") != self.pack_id:
            raise PackError(f"{run_file}: results of another pack (pack id "
                            f"{str(run.get('pack_id'))[:12]}, this pack is {self.pack_id[:12]})")
        shipped = {Path(n).name: d for n, d in self.manifest["files"].items()
                   if n.startswith(f"{RUNNER}/")}
        version = run.get("runner_version")
        if version != runner.RUNNER_VERSION or run.get("runner_sha256") != shipped:
            raise PackError(f"{run_file}: written by another runner (version "
                            f"{run.get('runner_version')!r}, not the pack's own "
                            f"{runner.RUNNER_VERSION!r} with its files' SHA-256)")
        packed = [k for k, c in self.manifest["cases"].items() if c.get("packed")]
        if packed and not run.get("cases"):
            raise PackError(f"{run_file}: the runner ran none of the pack's {len(packed)} "
                            "cases (it gave no result)")

    def machine(self) -> str:
        """What the runner recorded of the machine it ran on (Python, numpy, its runs)."""
        runs = len(self.run.get("merged_from") or ()) or 1
        return (f"Python {self.run.get('python')}, numpy {self.run.get('numpy')}, {runs} "
                f"run{'s' if runs > 1 else ''}, {len(self.run.get('cases') or ())} cases")

    @property
    def settings(self) -> Json:
        settings: Json = self.manifest.get("settings", {})
        return settings

    def record(self, target: str, case_id: str) -> Json | None:
        """The manifest's line for ``case_id`` on ``target`` (None: not in the pack)."""
        line: Json | None = self.manifest["cases"].get(case_key(target, case_id))
        if line is None or (line.get("id"), line.get("target")) != (case_id, target):
            return None
        return line

    def call(self, line: Json) -> Json:
        """The call protocol of the packed case of manifest line ``line``."""
        key = case_key(line["target"], line["id"])
        return _json(self.pack / "cases" / key / "call.json", "the call protocol")

    def result(self, line: Json) -> CaseResult:
        """The runner's result for the packed case of manifest line ``line``, checked."""
        case_id = line["id"]
        key = case_key(line["target"], case_id)
        digest = self.run["cases"].get(key)
        if digest is None:
            if key in self.run.get("not_run", []):
                raise Refused("not run: the runner's --deadline-s passed before this case "
                              "started (run the pack again with --only for the rest)")
            raise Refused("the pack's results hold none for this case (the runner did not run it)")
        folder = self.results / key
        path = folder / runner.RESULT
        if not path.is_file() or runner.sha256(path) != digest:
            raise Refused(f"{path}: not the result the runner recorded (edited or truncated)")
        try:
            found = _json(path, "the case's result")
        except PackError as exc:  # this case's record only: the others are judged
            raise Refused(str(exc)) from None
        if found.get("case") != case_id or found.get("call_sha256") != line.get("call_sha256"):
            raise Refused(f"{path}: the result of another case ({found.get('case')!r})")
        files: Json = found.get("files", {})
        result = CaseResult(str(found.get("status")), str(found.get("phase", "run")),
                            str(found.get("error", "")),
                            str(found.get("signal") or found.get("code")
                                or found.get("type") or ""),
                            bool(found.get("infrastructure")))
        if result.status != "ok":
            return result
        call = self.call(line)
        shapes = [(tuple(o["shape"]), o["dtype"]) for o in call["outputs"]]
        in_shapes = [(tuple(o["shape"]), o["dtype"]) for o in call["inputs"]]
        if len(found.get("calls", [])) != len(call["calls"]):
            raise Refused(f"{path}: {len(found.get('calls', []))} calls, the protocol has "
                          f"{len(call['calls'])} (truncated)")
        for done in found["calls"]:
            outputs = [self._array(folder, n, files, s) for n, s in
                       zip(done["outputs"], shapes, strict=True)]
            left = [None if n is None else self._array(folder, n, files, s)
                    for n, s in zip(done["inputs_left"], in_shapes, strict=True)]
            result.calls.append(RunCall(outputs, left, list(done.get("guard", [])),
                                        [float(t) for t in done["times"]], float(done["wall_s"])))
        return result

    @staticmethod
    def _array(folder: Path, name: str, files: Json, like: tuple[tuple[int, ...], str]
               ) -> np.ndarray:
        path = folder / name
        if name not in files or not path.is_file() or runner.sha256(path) != files[name]:
            raise Refused(f"{path}: missing, or not the file its result names (edited)")
        try:
            array = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise Refused(f"{path}: unreadable ({exc})") from None
        if (array.shape, array.dtype.name) != like:
            raise Refused(f"{path}: {array.dtype.name}{list(array.shape)}, the case's output is "
                          f"{like[1]}{list(like[0])} (the output of another case)")
        return array
