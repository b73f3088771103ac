"""Submission ids (``submission_id`` in the body, or the ``Idempotency-Key`` header) are
scoped to their submitter, and a repeat must carry the same job.

The rule is the IETF Idempotency-Key draft's (draft-ietf-httpapi-idempotency-key-header,
section 2.6-2.7): a key is unique per client, and a repeated key with a different payload
is an error (409 here, as the draft suggests for a mismatched reuse)."""

from __future__ import annotations

import json
import urllib.request

from typer.testing import CliRunner

from shapeshift.cli.main import app
from tests.runtime.conftest import demo_job

runner = CliRunner()


def post(url: str, token: str, body: dict, key: str | None = None) -> tuple[int, dict]:
    headers = {"Authorization": f"Bearer {token}"}
    if key is not None:
        headers["Idempotency-Key"] = key
    request = urllib.request.Request(url + "/jobs", data=json.dumps(body).encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def user_tokens(state: str, *users: str) -> dict[str, str]:
    tokens = {}
    for user in users:
        result = runner.invoke(app, ["token", "create", "--user", user, "--state", state])
        assert result.exit_code == 0, result.output
        tokens[user] = result.output.strip()
    return tokens


def test_ids_are_per_user_and_a_changed_body_is_409(live, tmp_path):
    controller, admin = live("1x1")
    tokens = user_tokens(str(tmp_path / "state"), "alice", "bob")
    job = json.loads(demo_job("a", iterations=1, iter_time=0.01))
    first = post(controller.url, tokens["alice"], {**job, "submission_id": "run-1"})
    assert first[0] == 201
    # Bob picks the same id: it is his own id, so his job is stored and answered as new.
    bobs = post(controller.url, tokens["bob"], {**job, "submission_id": "run-1"})
    assert bobs[0] == 201 and bobs[1]["id"] != first[1]["id"]
    # Alice retrying gets her first job back; the admin's "run-1" is a third namespace.
    assert post(controller.url, tokens["alice"], {**job, "submission_id": "run-1"}) == (
        200,
        {**first[1], "created": False},
    )
    assert post(controller.url, controller.token, {**job, "submission_id": "run-1"})[0] == 201
    # The same id with another job is refused and nothing is stored.
    changed = post(controller.url, tokens["alice"], {**job, "name": "other", "submission_id": "run-1"})
    assert changed[0] == 409 and changed[1]["id"] == first[1]["id"], changed
    assert "different job" in changed[1]["error"]
    assert sorted(j["user"] for j in admin.jobs()) == ["admin", "alice", "bob"]


def test_idempotency_key_header(live):
    controller, admin = live("1x1")
    job = json.loads(demo_job("h", iterations=1, iter_time=0.01))
    first = post(controller.url, controller.token, job, key='"abc-123"')  # RFC 8941 string form
    assert first[0] == 201
    again = post(controller.url, controller.token, job, key="abc-123")
    assert again == (200, {**first[1], "created": False})
    # The body's id and the header name the same submission: they must agree.
    assert post(controller.url, controller.token, {**job, "submission_id": "abc-123"}, key="abc-123")[0] == 200
    clash = post(controller.url, controller.token, {**job, "submission_id": "xyz"}, key="abc-123")
    assert clash[0] == 400 and "Idempotency-Key" in clash[1]["error"]
    assert post(controller.url, controller.token, job, key="bad key!")[0] == 400
    assert len(admin.jobs()) == 1
