"""The far end of ``--xtc-run-on``: sent as source through an execnet gateway (execnet's
``remote_exec``) and run by the remote Python, with the standard library only. For each
one-case pack it receives it writes the files into a folder of its own, runs the pack's
device runner on it (a process of its own, under the pack's time limits) and sends the
results folder back. Runtime libraries come once per gateway and are kept for the next
cases. ``None`` ends it, and its folder with it."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any


def serve(channel: Any) -> None:
    home = Path(tempfile.mkdtemp(prefix="pytest-xtc-remote-"))
    kept = home / "kept"
    kept.mkdir()
    try:
        while True:
            message = channel.receive()
            if message is None:
                return
            channel.send(run(home, kept, message))
    finally:
        shutil.rmtree(home, ignore_errors=True)


def run(home: Path, kept: Path, message: dict[str, Any]) -> dict[str, Any]:
    pack = Path(tempfile.mkdtemp(dir=home))
    try:
        for name, data in message["files"].items():
            path = pack / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if data is None:  # a runtime library sent before
                shutil.copyfile(kept / Path(name).name, path)
                continue
            path.write_bytes(data)
            if name.startswith("libs/"):
                shutil.copyfile(path, kept / Path(name).name)
        runner = pack / "runner" / "device_runner.py"
        flags = [f for f, on in (("-I", sys.flags.isolated), ("-S", sys.flags.no_site)) if on]
        try:
            done = subprocess.run([sys.executable, *flags, str(runner), str(pack)],
                                  capture_output=True, timeout=message["limit_s"])
        except subprocess.TimeoutExpired:
            return {"code": None, "said": "the device runner did not finish in time", "files": {}}
        results = pack / "results"
        files = {str(p.relative_to(results)): p.read_bytes() for p in results.rglob("*")
                 if p.is_file() and not str(p.relative_to(results)).startswith(".libs")}
        said = (done.stderr or done.stdout).decode(errors="replace")[-2000:]
        return {"code": done.returncode, "said": said, "files": files}
    finally:
        shutil.rmtree(pack, ignore_errors=True)


if __name__ == "__channelexec__":
    serve(channel)  # type: ignore[name-defined]  # noqa: F821  (execnet's global)
