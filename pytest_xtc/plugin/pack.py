"""Split runs in a pytest session (docs/split-run.md): ``--xtc-pack=DIR`` (compile and
pack), ``--xtc-from-pack=DIR`` (judge a pack's results), ``--xtc-run-on=SPEC`` (run each
case through an execnet gateway). Options are checked up front (a usage error); the pack's
manifest is written once, by the process that ends the session (xdist's controller)."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from pytest_xtc.core.execution.settings import Settings

#: The settings a pack records and a judging session must share (each changes a verdict).
SHARED = ("seed", "timing", "repeat_check")


def record(settings: Settings) -> dict[str, Any]:
    return {"seed": settings.base_seed, "timing": asdict(settings.timing),
            "repeat_check": settings.repeat_check}


def configure(config: pytest.Config, settings: Settings) -> None:
    """Check the split-run options; start the pack. Raises ValueError naming the problem."""
    given = [f"--xtc-{n}" for n, v in (("pack", settings.pack_dir),
             ("from-pack", settings.from_pack), ("run-on", settings.run_on)) if v]
    if len(given) > 1:
        raise ValueError(f"{' and '.join(given)}: choose one (a pack is made, judged, or "
                         "its cases run remotely, one at a time)")
    if not given:
        return
    from pytest_xtc.core.pack.writer import PackError, start

    try:
        if settings.from_pack:
            _check_judged(settings)
        elif settings.run_on:
            from pytest_xtc.core.pack import remote

            remote.check_spec(settings.run_on)
        elif not hasattr(config, "workerinput"):  # xdist's workers write into it
            start(Path(settings.pack_dir))
            config.pluginmanager.register(PackFinisher(settings), "xtc-pack-finisher")
    except PackError as exc:
        raise ValueError(str(exc)) from None


def _check_judged(settings: Settings) -> None:
    from pytest_xtc.core.execution import packed

    made = packed.opened(settings.from_pack).settings
    now = record(settings)
    for name in SHARED:
        if made.get(name) != now[name]:
            raise ValueError(f"--xtc-from-pack={settings.from_pack}: the pack was made with "
                             f"{name} {made.get(name)!r}, this session has {now[name]!r} "
                             "(give the options the pack was made with)")


class PackFinisher:
    """Writes the manifest when the session ends: the pack is then ready to carry."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        from pytest_xtc.core.pack import writer

        manifest = writer.finish(Path(self.settings.pack_dir), record(self.settings))
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"xtc: execution pack written: {manifest.parent} (run "
                                f"python3 {manifest.parent}/runner/device_runner.py "
                                f"{manifest.parent})")
