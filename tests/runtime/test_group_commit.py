"""Group commit of submits (for the submit latency goal): concurrent submits share one
transaction without losing exactly-once (submission ids) or durability before the answer."""

from __future__ import annotations

import http.client
import json
import threading
from concurrent.futures import CancelledError

import pytest

from shapeshift.errors import InputError
from shapeshift.runtime.admission import Submission
from shapeshift.runtime.group_commit import GroupCommit
from shapeshift.runtime.remote import ControllerClient
from shapeshift.runtime.store import StateUnavailable, Store
from tests.runtime.conftest import FailingWrites, demo_job, wait_for


def test_items_that_queue_while_a_batch_is_handled_form_the_next_batch():
    # The first item finds nothing else waiting, so it is handled alone; the three put
    # while its call is blocked are all waiting when it returns: one call for the three.
    calls: list[list[str]] = []
    entered, release = threading.Event(), threading.Event()

    def handle(items: list[str]) -> list[str | BaseException]:
        calls.append(list(items))
        if len(calls) == 1:
            entered.set()
            release.wait(10)
        return [item.upper() for item in items]

    group = GroupCommit(handle, "test-group")
    first = group.put("a")
    assert entered.wait(10)
    later = [group.put(x) for x in "bcd"]
    release.set()
    assert [f.result(10) for f in [first, *later]] == ["A", "B", "C", "D"]
    assert calls == [["a"], ["b", "c", "d"]]
    group.close()


def test_a_failed_batch_fails_each_of_its_waiters_and_the_thread_goes_on():
    # handle raising fails every item of that call; a per-item exception fails only its item
    def handle(items: list[str]) -> list[str | BaseException]:
        if "boom" in items:
            raise StateUnavailable("cannot write the state database: database or disk is full")
        return [ValueError(i) if i == "bad" else i for i in items]

    group = GroupCommit(handle, "test-group")
    with pytest.raises(StateUnavailable, match="disk is full"):
        group.put("boom").result(10)
    bad, good = group.put("bad"), group.put("good")
    with pytest.raises(ValueError):
        bad.result(10)
    assert good.result(10) == "good"
    group.close()


def test_a_submit_cancelled_before_its_batch_is_not_handled():
    # The waiter went away before the admission thread took the item: nothing is stored.
    seen: list[str] = []
    entered, release = threading.Event(), threading.Event()

    def handle(items: list[str]) -> list[str | BaseException]:
        seen.extend(items)
        entered.set()
        release.wait(10)
        return list(items)

    group = GroupCommit(handle, "test-group")
    group.put("first")
    assert entered.wait(10)
    gone = group.put("gone")
    assert gone.cancel()
    kept = group.put("kept")
    release.set()
    assert kept.result(10) == "kept"
    with pytest.raises(CancelledError):
        gone.result(0)
    assert seen == ["first", "kept"]
    group.close()


def _count(store: Store, table: str) -> int:
    return len(store._read(f"SELECT * FROM {table}"))


def test_one_batch_stores_each_submission_id_once(tmp_path):
    # Job 1 holds id "a". In the batch: "a" again -> job 1; "b" new -> job 2; "b" again in
    # the same batch -> job 2; no id -> job 3. Three jobs, three "submitted" events.
    store = Store(tmp_path / "state.db")
    assert store.add_job_once("first", "{}", 1.0, "a") == ("1", True)
    answers = store.add_jobs_once(
        [
            ("x", "{}", 2.0, "a", "admin"),
            ("y", "{}", 2.0, "b", "admin"),
            ("z", "{}", 2.0, "b", "admin"),
            ("w", "{}", 2.0, None, "admin"),
        ]
    )
    assert answers == [("1", False), ("2", True), ("2", False), ("3", True)]
    assert [j["name"] for j in store.jobs()] == ["first", "y", "w"]
    assert _count(store, "events") == 3
    store.close()


def test_a_write_failing_inside_a_batch_stores_none_of_it(tmp_path):
    # The disk fills after the first job row and its event (2 statements): the whole batch
    # is rolled back, no job id is used up, and the store reports the failure.
    store = Store(tmp_path / "state.db")
    real = store._db
    store._db = FailingWrites(real, "database or disk is full", after=2)  # type: ignore[assignment]
    with pytest.raises(StateUnavailable, match="database or disk is full"):
        store.add_jobs_once([("x", "{}", 1.0, "a", "admin"), ("y", "{}", 1.0, "b", "admin")])
    assert store.write_error == "database or disk is full"
    assert _count(store, "jobs") == 0 and _count(store, "events") == 0
    store._db = real
    assert store.add_jobs_once([("x", "{}", 1.0, "a", "admin")]) == [("1", True)]
    assert store.write_error == ""
    store.close()


def test_a_bad_submit_in_a_group_is_refused_alone(live):
    # One admission call with a good job, a malformed one, a repeat of the good one's id
    # and a job too big for the 1x2 cluster: the two good answers name one job.
    controller, _ = live("1x2")
    good = json.dumps({**json.loads(demo_job("good", iterations=2)), "submission_id": "g"})
    big = demo_job("big", gpus=4)
    batch = [Submission(text, None, "admin", None) for text in (good, '{"name": "x"}', good, big)]
    results = controller._admit_batch(batch)
    assert results[0] == ("1", True) and results[2] == ("1", False)
    assert isinstance(results[1], InputError) and "command" in str(results[1])
    assert isinstance(results[3], InputError) and "needs 4 GPUs but the cluster has 2" in str(results[3])
    assert [j["id"] for j in controller.store.jobs()] == ["1"]


def test_concurrent_submits_with_repeated_ids_make_one_job_per_id(live):
    # 24 threads at once, 8 distinct submission ids (3 submits each): exactly 8 jobs, and
    # every submit of an id gets the same job id, however the submits were grouped.
    controller, client = live("1x2")
    answers: dict[str, set[str]] = {}
    lock = threading.Lock()
    barrier = threading.Barrier(24)

    def submit(i: int) -> None:
        barrier.wait()
        job_id = client.submit(demo_job(f"j{i % 8}", iterations=1, iter_time=0.01), f"sid-{i % 8}")
        with lock:
            answers.setdefault(f"sid-{i % 8}", set()).add(job_id)

    threads = [threading.Thread(target=submit, args=(i,)) for i in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(answers) == 8 and all(len(ids) == 1 for ids in answers.values())
    assert sorted(int(j["id"]) for j in controller.store.jobs()) == list(range(1, 9))
    wait_for(
        lambda: all(j["state"] == "completed" for j in client.jobs()), 30, "every job to complete", detail=client.jobs
    )


def _raw_submit(url: str, token: str, body: bytes, chunked: bool) -> tuple[int, dict[str, object]]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        if chunked:  # no Content-Length: the short path passes it to the FastAPI route
            conn.request("POST", "/jobs", body=iter([body]), headers=headers, encode_chunked=True)
        else:
            conn.request("POST", "/jobs", body=body, headers=headers)
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def test_the_short_submit_path_and_the_framework_route_answer_alike(live):
    # FastSubmit answers a submit with a Content-Length; a chunked one goes through FastAPI.
    # Same bodies, same answers: a refused job, a bad encoding, a new job and its repeat.
    controller, _ = live("1x2")
    bad = json.dumps({"name": "x", "command": "run {nope}", "iterations": 1}).encode()
    job = json.dumps({**json.loads(demo_job("a", iterations=1, iter_time=0.01)), "submission_id": "same"}).encode()
    for body in (bad, b"\xff\xfe"):
        short = _raw_submit(controller.url, controller.token, body, chunked=False)
        framework = _raw_submit(controller.url, controller.token, body, chunked=True)
        assert short == framework and short[0] == 400, (short, framework)
    assert _raw_submit(controller.url, controller.token, job, chunked=True) == (201, {"id": "1", "created": True})
    assert _raw_submit(controller.url, controller.token, job, chunked=False) == (200, {"id": "1", "created": False})


def test_a_crash_right_after_a_group_commit_loses_and_duplicates_no_submit(serve_process, tmp_path):
    # Six clients submit at once, each with its own submission id; the controller dies
    # right after its first commit (one group: one submit or several), before answering
    # anyone. Every client retries against the restarted controller: six jobs, one per id.
    state = tmp_path / "state"
    first = serve_process("--cluster", "1x2", crash_at="after_submit_commit")
    client = ControllerClient.from_state(state)
    answers: dict[int, str] = {}
    barrier = threading.Barrier(6)

    def submit(i: int) -> None:
        barrier.wait()
        answers[i] = client.submit(demo_job(f"j{i}", iterations=1, iter_time=0.01), f"burst-{i}", retry=True)

    threads = [threading.Thread(target=submit, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    first.wait(timeout=30)
    assert first.returncode == 137  # died at the injected point
    serve_process("--cluster", "1x2")
    for t in threads:
        t.join(timeout=30)
    assert sorted(answers) == list(range(6)) and len(set(answers.values())) == 6
    assert sorted(j["id"] for j in ControllerClient.from_state(state).jobs()) == sorted(answers.values())
