"""``--xtc-run-on``: a one-case pack run through an execnet gateway (the transport
pytest-xdist uses: ``popen``, ``socket=HOST:PORT``, ``ssh=HOST``), by the same device
runner as a carried pack. No pytest, no XTC. One gateway per spec and process, opened on
first use and ended at exit; a case whose run does not come back in time ends its
gateway (the next case opens another)."""

from __future__ import annotations

import atexit
from pathlib import Path
from typing import Any

from pytest_xtc.core.pack import device_runner as runner
from pytest_xtc.core.pack import remote_side

MARGIN_S = 30.0  # over the runner's own limits: sending, receiving
_open: dict[str, tuple[Any, Any, set[str]]] = {}  # spec: (gateway, channel, libraries sent)


class RemoteError(RuntimeError):
    """The gateway could not be opened, or the case's run did not come back."""


def check_spec(spec: str) -> None:
    """Refuse a spec execnet cannot open (ValueError naming it)."""
    import execnet

    parsed = execnet.XSpec(spec)
    if not (parsed.popen or parsed.socket or parsed.ssh):
        raise ValueError(f"--xtc-run-on={spec}: not an execnet gateway spec (expected "
                         "popen//python=python3, socket=HOST:PORT or ssh=HOST//python=python3)")


def _channel(spec: str) -> tuple[Any, Any, set[str]]:
    if spec not in _open:
        import execnet

        try:
            gateway = execnet.makegateway(spec)
            channel = gateway.remote_exec(remote_side)
        except Exception as exc:
            raise RemoteError(f"cannot open execnet gateway {spec}: {exc}") from None
        _open[spec] = (gateway, channel, set())
    return _open[spec]


def run(spec: str, pack: Path) -> None:
    """Run ``pack`` (one case) on the far end of ``spec``; its results into
    ``pack/results``. Raises RemoteError when they do not come back."""
    _, channel, sent = _channel(spec)
    manifest = runner.load_json(pack / runner.MANIFEST)
    files: dict[str, bytes | None] = {runner.MANIFEST: (pack / runner.MANIFEST).read_bytes()}
    for name in manifest["files"]:
        files[name] = None if name in sent else (pack / name).read_bytes()
    limit = runner.START_S + sum(sum(c.get("limits_s", [])) for c in manifest["cases"].values())
    try:
        channel.send({"files": files, "limit_s": limit})
        answer = channel.receive(timeout=limit + MARGIN_S)
    except Exception as exc:
        close(spec)
        raise RemoteError(f"{spec}: {type(exc).__name__}: {exc}") from None
    sent.update(n for n in manifest["files"] if n.startswith("libs/"))
    if answer["code"] is None or not answer["files"]:
        raise RemoteError(f"{spec}: the device runner gave no results "
                          f"(status {answer['code']}): {answer['said'].strip()[-300:]}")
    for name, data in answer["files"].items():
        path = pack / "results" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def close(spec: str) -> None:
    if spec not in _open:
        return
    gateway, channel, _ = _open.pop(spec)
    try:
        channel.send(None)
        channel.waitclose(5)
    except Exception:
        pass
    gateway.exit()


@atexit.register
def close_all() -> None:
    for spec in list(_open):
        close(spec)
