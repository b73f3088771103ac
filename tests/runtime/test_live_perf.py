"""A plan-aware policy running live learns from the workers' reports
(the same ``Knowledge.observe``/refit as in simulation), and ``queue --perf`` shows the
model's predicted iteration time beside the observed one."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from shapeshift.cli.main import app
from tests.runtime.conftest import wait_for


def test_rubick_live_records_the_reported_iteration_time_and_queue_perf_shows_both(live, tmp_path):
    controller, client = live("1x4", policy="rubick")
    command = "{python} -m shapeshift.client.demo --iterations {iterations} --iter-time 0.05"
    job = {"name": "r", "command": command, "iterations": 80, "model": "roberta", "global_batch": 64}
    job_id = client.submit(json.dumps({**job, "resources": {"gpus": 2}}))
    knowledge = controller.policy.knowledge  # type: ignore[attr-defined]
    wait_for(
        lambda: client.job(job_id)["predicted_iter_time"] is not None and client.job(job_id)["state"] == "running",
        60,
        "a report and a prediction",
        detail=client.jobs,
    )
    # A report landing between reading the table and reading the job changes iter_time
    # (0.0505 vs 0.0507 prints 0.050 or 0.051): read the job on both sides of the table
    # and take a table read while neither changed.
    for _ in range(20):
        before = client.job(job_id)
        table = CliRunner().invoke(app, ["queue", "--perf", "--state", str(tmp_path / "state")]).output
        row = client.job(job_id)
        if (before["iter_time"], before["predicted_iter_time"]) == (row["iter_time"], row["predicted_iter_time"]):
            break
    observed, predicted = row["iter_time"], row["predicted_iter_time"]
    # the demo sleeps 0.05 s per iteration: what it reports is that plus a little overhead
    assert 0.05 <= observed < 0.2
    assert f"{predicted:.3f}" in table and f"{observed:.3f}" in table
    wait_for(lambda: knowledge.knowledge("roberta").observed, 20, "the policy to observe the job's speed")
    (measured,) = knowledge.knowledge("roberta").observed.values()
    # the model learnt the REPORTED speed (before the fix it saw either nothing or the
    # launch-time guess); its error on it is now part of the refit rule's window
    assert 0.05 <= measured.iter_time < 0.2
    assert knowledge.knowledge("roberta").recent_errors
