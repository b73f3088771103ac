"""``/metrics`` text: the metric names, types and label names scrapers and dashboards rely on.

``EXPECTED`` was read off the exposition the controller wrote before it used
``prometheus_client`` (the same two nodes, three jobs and two decisions as below), so a
rename, a changed type or a lost label shows up here.
"""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from shapeshift.runtime.metrics_export import DecisionStats, render

#: family -> (type, label names of its samples, sample suffixes)
EXPECTED = {
    "shapeshift_queue_length": ("gauge", frozenset(), frozenset({""})),
    "shapeshift_running_jobs": ("gauge", frozenset(), frozenset({""})),
    "shapeshift_jobs": ("gauge", frozenset({"state"}), frozenset({""})),
    "shapeshift_gpus": ("gauge", frozenset(), frozenset({""})),
    "shapeshift_gpus_allocated": ("gauge", frozenset(), frozenset({""})),
    "shapeshift_node_gpus_allocated": ("gauge", frozenset({"node"}), frozenset({""})),
    "shapeshift_tenant_gpus_allocated": ("gauge", frozenset({"tenant"}), frozenset({""})),
    "shapeshift_tenant_queued_jobs": ("gauge", frozenset({"tenant"}), frozenset({""})),
    "shapeshift_tenant_gpu_quota": ("gauge", frozenset({"tenant"}), frozenset({""})),
    "shapeshift_decision_seconds": ("histogram", frozenset({"le"}), frozenset({"_bucket", "_sum", "_count"})),
}


def _snapshot() -> str:
    stats = DecisionStats()
    stats.observe(0.003)  # falls in le=0.005
    stats.observe(2.0)  # falls in le=5
    jobs = [
        {"state": "running", "tenant": "a", "gpus": 2},
        {"state": "queued", "tenant": "b", "gpus": 1},
        {"state": "completed", "tenant": "", "gpus": 1},
    ]
    nodes = [{"name": "n0", "gpus": 4, "used": 2}, {"name": 'n"1', "gpus": 4, "used": 0}]
    return render(jobs, nodes, {"a": 2}, stats)


def test_names_types_and_labels_are_unchanged():
    found = {}
    for family in text_string_to_metric_families(_snapshot()):
        labels = frozenset(k for s in family.samples for k in s.labels)
        suffixes = frozenset(s.name.removeprefix(family.name) for s in family.samples)
        found[family.name] = (family.type, labels, suffixes)
    assert found == EXPECTED


def test_values_follow_the_snapshot():
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(_snapshot())
        for s in family.samples
    }
    # One queued, one running job; 8 slots of which n0 holds 2; tenant a runs 2 GPUs
    # against a quota of 2, b waits with one job; a tenant without a quota has no quota line.
    assert samples[("shapeshift_queue_length", ())] == 1
    assert samples[("shapeshift_jobs", (("state", "completed"),))] == 1
    assert samples[("shapeshift_gpus", ())] == 8
    assert samples[("shapeshift_node_gpus_allocated", (("node", 'n"1'),))] == 0
    assert samples[("shapeshift_tenant_gpus_allocated", (("tenant", "a"),))] == 2
    assert samples[("shapeshift_tenant_queued_jobs", (("tenant", "b"),))] == 1
    assert ("shapeshift_tenant_gpu_quota", (("tenant", "b"),)) not in samples
    # Cumulative buckets: 0 below 5 ms, 1 from 5 ms, both from 5 s; sum 2.003 s.
    assert samples[("shapeshift_decision_seconds_bucket", (("le", "0.001"),))] == 0
    assert samples[("shapeshift_decision_seconds_bucket", (("le", "0.005"),))] == 1
    assert samples[("shapeshift_decision_seconds_bucket", (("le", "+Inf"),))] == 2
    assert samples[("shapeshift_decision_seconds_count", ())] == 2
    assert abs(samples[("shapeshift_decision_seconds_sum", ())] - 2.003) < 1e-9
