"""Headless Chromium driven through the DevTools protocol over a pipe
(``--remote-debugging-pipe``: commands on the browser's fd 3, answers on its fd 4, each a
JSON message ended by a NUL byte), with the standard library only: open a page at a
window width, type into a field as a user would, read the DOM back, take screenshots.
Nothing is fetched from the network."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

NAMES = ("chromium", "chromium-browser", "google-chrome")
#: Opens the pipes on fds 3 and 4, then becomes the browser.
LAUNCH = ("import os, sys; os.dup2(int(sys.argv[1]), 3); os.dup2(int(sys.argv[2]), 4); "
          "os.execvp(sys.argv[3], sys.argv[3:])")


def find() -> str | None:
    return next((found for name in NAMES if (found := shutil.which(name))), None)


class Browser:
    """One headless browser and one page in it; a context manager."""

    def __init__(self, binary: str, profile: Path, timeout: float = 60.0) -> None:
        to_browser, self._commands = os.pipe()
        self._answers, from_browser = os.pipe()
        self.timeout = timeout
        self._buffer = b""
        self._id = 0
        self.events: list[dict[str, Any]] = []
        self.process = subprocess.Popen(
            [sys.executable, "-c", LAUNCH, str(to_browser), str(from_browser), binary,
             "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-dev-shm-usage", "--hide-scrollbars", "--remote-debugging-pipe",
             f"--user-data-dir={profile}", "about:blank"],
            pass_fds=(to_browser, from_browser), stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        os.close(to_browser)
        os.close(from_browser)
        page = next(t for t in self.send("Target.getTargets")["targetInfos"]
                    if t["type"] == "page")
        self.session = self.send("Target.attachToTarget", targetId=page["targetId"],
                                 flatten=True)["sessionId"]
        self.send("Page.enable", session=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        os.close(self._commands)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._answers)

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise TimeoutError("the browser did not answer")
            chunk = os.read(self._answers, 1 << 16)
            if not chunk:
                raise ConnectionError("the browser closed its pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        found: dict[str, Any] = json.loads(message)
        return found

    def send(self, method: str, session: bool = False, **params: Any) -> dict[str, Any]:
        """One command; its result (RuntimeError on a protocol error)."""
        self._id += 1
        message: dict[str, Any] = {"id": self._id, "method": method, "params": params}
        if session:
            message["sessionId"] = self.session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            answer = self._read(deadline)
            if answer.get("id") == self._id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                result: dict[str, Any] = answer.get("result", {})
                return result
            self.events.append(answer)

    def wait_for(self, method: str) -> None:
        deadline = time.monotonic() + self.timeout
        while not any(e.get("method") == method for e in self.events):
            self.events.append(self._read(deadline))
        self.events.clear()

    def open(self, url: str, width: int, height: int = 1000) -> None:
        """The page at ``url`` in a window ``width`` CSS pixels wide, loaded."""
        self.send("Emulation.setDeviceMetricsOverride", session=True, width=width,
                  height=height, deviceScaleFactor=1, mobile=width < 600)
        self.events.clear()
        self.send("Page.navigate", session=True, url=url)
        self.wait_for("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        found = self.send("Runtime.evaluate", session=True, expression=expression,
                          returnByValue=True)
        if "exceptionDetails" in found:
            raise RuntimeError(f"{expression}: {found['exceptionDetails']}")
        return found["result"].get("value")

    def type_into(self, selector: str, text: str) -> None:
        """Focus the field and type ``text`` key by key (each key a real input event)."""
        self.evaluate(f"document.querySelector({json.dumps(selector)}).focus()")
        for char in text:
            self.send("Input.dispatchKeyEvent", session=True, type="keyDown", text=char,
                      key=char, unmodifiedText=char)
            self.send("Input.dispatchKeyEvent", session=True, type="keyUp", key=char)

    def screenshot(self, path: Path) -> bytes:
        data = base64.b64decode(self.send("Page.captureScreenshot", session=True,
                                          format="png")["data"])
        path.write_bytes(data)
        return data
