"""The live dashboard in a real headless Chromium (Debian's ``chromium``), driven over the
DevTools protocol: one page load, no reloads, so the job moving to ``completed`` proves
the page refreshes itself."""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import shutil
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.runtime.conftest import demo_job, wait_for

BROWSER = next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
websockets = pytest.importorskip("websockets.sync.client", reason="websockets (extra dev) drives the browser")
pytestmark = pytest.mark.skipif(BROWSER is None, reason="no Chromium here (apt-get install chromium)")


class Page:
    """The smallest DevTools client: navigate, evaluate, screenshot."""

    def __init__(self, ws: Any):
        self.ws = ws
        self.ids = itertools.count(1)

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        msg_id = next(self.ids)
        self.ws.send(json.dumps({"id": msg_id, "method": method, "params": params}))
        while True:
            reply = json.loads(self.ws.recv(timeout=30))
            if reply.get("id") == msg_id:
                if "error" in reply:
                    raise RuntimeError(reply["error"])
                return reply.get("result", {})

    def eval(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        return result["result"].get("value")


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Page]:
    profile = tmp_path / "chromium-profile"
    proc = subprocess.Popen(
        [
            str(BROWSER),
            "--headless=new",
            "--no-sandbox",  # tests may run as root
            "--disable-gpu",
            "--no-first-run",
            "--disable-extensions",
            "--remote-debugging-address=127.0.0.1",
            "--remote-debugging-port=0",
            f"--user-data-dir={profile}",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        port_file = profile / "DevToolsActivePort"
        wait_for(lambda: port_file.exists() and port_file.read_text().strip() != "", 30, "Chromium to start")
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
            target = next(t for t in json.load(r) if t["type"] == "page")
        with websockets.connect(target["webSocketDebuggerUrl"], max_size=None, open_timeout=10) as ws:
            page = Page(ws)
            page.send("Page.enable")
            yield page
    finally:
        proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)


def test_dashboard_shows_a_submitted_job_until_it_completes(live, browser, tmp_path):
    controller, client = live("1x2")
    # Without a token the page holds no data and asks for one.
    browser.send("Page.navigate", url=f"{controller.url}/dashboard")
    wait_for(lambda: browser.eval("document.getElementById('status').textContent") == "token needed", 20, "401")
    assert browser.eval("document.querySelectorAll('#jobs tbody tr').length") == 0
    browser.send("Page.navigate", url=f"{controller.url}/dashboard#token={controller.token}&refresh=300")
    status = "document.getElementById('status').textContent"
    wait_for(
        lambda: browser.eval("document.body.dataset.updated") is not None,
        20,
        "a refresh",
        detail=lambda: browser.eval(status),
    )
    assert "#token" not in browser.eval("location.href")  # the token leaves the address bar
    job_id = client.submit(demo_job("shown", iterations=30, iter_time=0.1))  # 3 s: seen before it ends
    states: list[str] = []

    def page_state() -> str | None:
        state = browser.eval(f"document.querySelector('tr[data-job-id=\"{job_id}\"]')?.dataset.state ?? null")
        if state is not None and (not states or states[-1] != state):
            states.append(state)
        return state

    wait_for(lambda: page_state() == "completed", 30, "the page to show the job completed", interval=0.1)
    assert states[0] in ("queued", "running") and states[-1] == "completed", states
    row = browser.eval(f"document.querySelector('tr[data-job-id=\"{job_id}\"]').innerText")
    assert "shown" in row and "admin" in row and "30/30" in row
    assert browser.eval("document.querySelector('#nodes tbody tr').dataset.node") == "node000"
    events = browser.eval("document.querySelector('#events tbody').innerText")
    assert "completed" in events and "submitted" in events
    shot = browser.send("Page.captureScreenshot", format="png")
    (tmp_path / "dashboard.png").write_bytes(base64.b64decode(shot["data"]))  # for a person to look at
