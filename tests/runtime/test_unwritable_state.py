"""A read-only or full state store while the controller runs.

The controller must not look healthy then: ``/health``
answers 503 naming the cause, a submit gets ONE clear 503 (nothing stored:
no job row, no event, no job id used up), reads keep answering, the controller stays up
and takes submits again once the store is writable.

How the two conditions are made without root: *read-only* is SQLite's own
``PRAGMA query_only`` on the controller's writer connection (SQLite then refuses every
write with SQLITE_READONLY, "attempt to write a readonly database", as it does for a
file or mount it cannot write; ``chmod`` cannot stop root, whom tests may run as). *Full*
needs a filesystem that fills up (a tiny tmpfs: root only), so the writer connection
is wrapped to raise the error SQLite raises then (SQLITE_FULL, "database or disk is
full") on every data change: with a full disk the WAL cannot grow, so every write fails.
"""

from __future__ import annotations

import json

import pytest

from shapeshift.runtime.remote import ControllerClient
from tests.runtime.conftest import FailingWrites, demo_job, wait_for

READONLY = "attempt to write a readonly database"
FULL = "database or disk is full"


def _post(client: ControllerClient, body: str) -> tuple[int, dict[str, object]]:
    status, data = client.request("POST", "/jobs", body.encode(), auth=True)
    return status, json.loads(data)


def _health(client: ControllerClient) -> tuple[int, dict[str, object]]:
    status, data = client.request("GET", "/health", auth=False)
    return status, json.loads(data)


@pytest.mark.parametrize("error", [READONLY, FULL])
def test_an_unwritable_store_answers_503_with_its_cause_stores_nothing_and_recovers(live, error):
    controller, client = live("1x2")
    first = client.submit(demo_job("before", iterations=2, iter_time=0.02))
    wait_for(lambda: client.job(first)["state"] == "completed", 20, "the first job to complete")
    store = controller.store
    events = store.events()
    writer = store._db
    with store._lock:  # between two transactions of the controller's own threads
        if error == READONLY:
            writer.execute("PRAGMA query_only = ON")
        else:
            store._db = FailingWrites(writer, FULL)  # type: ignore[assignment]
    try:
        # The first submit may reach the write itself (before the next probe notices);
        # either way the answer is one 503 that names the cause and says nothing changed.
        for name in ("during-1", "during-2"):
            status, body = _post(client, json.dumps({**json.loads(demo_job(name)), "submission_id": name}))
            assert status == 503, body
            assert error in str(body["error"]) and "nothing was changed" in str(body["error"])
        wait_for(lambda: _health(client)[0] == 503, 10, "/health to report the unwritable store")
        assert _health(client)[1]["state"] == f"unwritable: {error}"
        assert [j["id"] for j in client.jobs()] == [first]  # reads answer
        assert store.events() == events  # no half-stored submit: no event either
        assert all(t.is_alive() for t in controller._threads)  # API and control loop still up
    finally:
        with store._lock:
            store._db = writer
            writer.execute("PRAGMA query_only = OFF")
    wait_for(lambda: _health(client)[0] == 200, 10, "/health to recover")
    # The refused submits used up no job id, and the same submission id now creates it.
    again = client.submit(demo_job("during-1", iterations=1, iter_time=0.02), "during-1")
    assert again == "2"
    wait_for(lambda: client.job(again)["state"] == "completed", 20, "the job submitted after recovery to complete")
