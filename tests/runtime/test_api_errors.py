"""Odd job ids and deeply nested bodies get a 4xx with one line, never a 500.

A job id is what the store hands out: a positive decimal integer in ASCII digits. Python's
``str.isdigit`` also accepts '²' and the Arabic-Indic '٥' (and ``int('٥') == 5``), and an id
of 26 digits overflows SQLite's 64-bit integers; each of these once reached the store.
A JSON array nested 400,000 deep (800 KB, under the 1 MiB body limit) exhausts Python's
recursion limit in the parser.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from tests.runtime.conftest import demo_job, wait_for

ODD_IDS = ["%C2%B2", "99999999999999999999999999", "%D9%A5", "-1", "1e3", "%20%201"]


@pytest.mark.parametrize("job_id", ODD_IDS)
def test_odd_job_ids_are_404_with_one_line(live, job_id):
    _, client = live("1x1")
    for _ in range(5):  # ids 1-5 exist, so '٥' must not resolve to job 5
        client.submit(demo_job("x", iterations=1, iter_time=0.01))
    for method, path in [
        ("GET", f"/jobs/{job_id}"),
        ("GET", f"/jobs/{job_id}/logs"),
        ("GET", f"/jobs/{job_id}/lease?key=k"),
        ("POST", f"/jobs/{job_id}/cancel"),
    ]:
        status, body = client.request(method, path, b"" if method == "POST" else None)
        assert status == 404, (method, path, status, body[:200])
        message = json.loads(body)["error"]
        assert message.startswith(("no job", "unknown lease")) and "\n" not in message


def test_deeply_nested_submit_body_is_400(live):
    _, client = live("1x1")
    body = b"[" * 400_000 + b"]" * 400_000
    status, answer = client.request("POST", "/jobs", body)
    assert status == 400, answer[:200]
    message = json.loads(answer)["error"]
    assert "nest" in message and "\n" not in message
    yaml_body = b"a: " + b"[" * 100_000  # YAML's flow style, as deep
    status, answer = client.request("POST", "/jobs", yaml_body)
    assert status == 400, answer[:200]
    assert client.jobs() == []


def test_deeply_nested_metrics_report_is_400(live):
    # With a live run's lease key, so the body reaches the report's parser.
    controller, client = live("1x1")
    job_id = client.submit(demo_job("r", iterations=400, iter_time=0.05))
    wait_for(lambda: job_id in controller.runs and controller.runs[job_id].spawned, 20, "the run to start")
    key = controller.runs[job_id].lease_key
    body = b"[" * 400_000 + b"]" * 400_000
    request = urllib.request.Request(
        f"{controller.url}/jobs/{job_id}/metrics", data=body, headers={"Authorization": f"Lease {key}"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            status = response.status
    except urllib.error.HTTPError as exc:
        status = exc.code
    assert status == 400
