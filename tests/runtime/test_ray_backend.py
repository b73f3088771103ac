"""Must-show test 4: the same jobs on the Ray backend, with a two-node local Ray cluster.

Everything stays on loopback: ``RAY_AUTH_MODE=disabled`` and
``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` are set before Ray starts, and the cluster is
``ray.cluster_utils.Cluster`` (processes on this machine)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from shapeshift.cluster import load_cluster
from shapeshift.runtime.backends.ray_backend import node_resources
from tests.runtime.conftest import demo_job, wait_for

os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
ray = pytest.importorskip("ray")
cluster_utils = pytest.importorskip("ray.cluster_utils")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[object]:
    """Two Ray nodes standing for Shapeshift nodes node000 and node001 (one GPU slot each)."""
    resources = node_resources(load_cluster("2x1"))
    cluster = cluster_utils.Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 1,
            "resources": resources["node000"],
            "include_dashboard": False,
            # a dead node is noticed in about a second, not Ray's default 30 s
            "_system_config": {"health_check_period_ms": 500, "health_check_failure_threshold": 2},
        },
    )
    cluster.add_node(num_cpus=1, resources=resources["node001"])
    ray.init(address=cluster.address, namespace="shapeshift", log_to_driver=False)
    cluster.wait_for_nodes()
    try:
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()


def test_three_jobs_on_two_ray_nodes_all_complete(live, ray_cluster):
    from shapeshift.runtime.backends.ray_backend import RayBackend

    _, client = live("2x1", backend=RayBackend(load_cluster("2x1")))
    ids = [client.submit(demo_job(f"job{i}", iterations=10, iter_time=0.1)) for i in range(3)]
    seen: dict[str, list[str]] = {i: [] for i in ids}

    def poll() -> bool:
        for job in client.jobs():
            history = seen[job["id"]]
            if not history or history[-1] != job["state"]:
                history.append(job["state"])
        return all(h[-1] in ("completed", "failed") for h in seen.values())

    wait_for(poll, 120, "all three jobs to finish on Ray", interval=0.05)
    rows = {j["id"]: j for j in client.jobs()}
    assert all(rows[i]["state"] == "completed" for i in ids), rows
    for job_id in ids:
        assert [s for s in seen[job_id] if s != "queued"] == ["running", "completed"], seen
    # One slot per node, three one-slot jobs: the third ran only after another finished,
    # and the first two ran on different Ray nodes at once.
    assert seen["3"][0] == "queued"
    assert rows["3"]["first_start"] >= min(rows["1"]["end_time"], rows["2"]["end_time"]) - 0.01
    assert rows["1"]["first_start"] < rows["2"]["end_time"] and rows["2"]["first_start"] < rows["1"]["end_time"]
    # Each rank ran as a Ray actor; every actor is gone once its run is forgotten.
    # Killing an actor is asynchronous in Ray: wait for the names to go, not read them once.
    def leftover() -> list:
        return [a for a in ray.util.list_named_actors(all_namespaces=True) if "shapeshift-" in str(a)]

    wait_for(lambda: leftover() == [], 15, "every rank's actor to be gone", detail=leftover)


@pytest.mark.skipif(
    not os.environ.get("SHAPESHIFT_RAY_NODE_KILL"),
    reason="kills a Ray node (about 12 s alone under load): set SHAPESHIFT_RAY_NODE_KILL=1",
)
def test_a_dead_ray_node_is_excluded_and_the_healthy_job_completes_on_time(live, ray_cluster):
    # Kept last (it removes a node of the module's cluster). Two long jobs, one per
    # node; node001 dies. The loop must not block on Ray calls nor place the retry on
    # the dead node: the job on node000 keeps being polled
    # and completes; the vanished job is requeued and runs on node000, never on node001.
    from shapeshift.runtime.backends.ray_backend import RayBackend

    _, client = live("2x1", backend=RayBackend(load_cluster("2x1")))
    healthy = client.submit(demo_job("healthy", iterations=30, iter_time=0.1))
    victim = client.submit(demo_job("victim", iterations=30, iter_time=0.1))
    wait_for(lambda: all(client.job(i)["state"] == "running" for i in (healthy, victim)), 60, "both jobs to run")
    on_node001 = victim if client.job(victim)["placement"] == "node001:1" else healthy
    on_node000 = healthy if on_node001 == victim else victim
    worker = next(n for n in ray_cluster.worker_nodes)
    ray_cluster.remove_node(worker, allow_graceful=False)
    wait_for(
        lambda: client.job(on_node000)["state"] == "completed", 60, "the healthy job to complete", detail=client.jobs
    )
    wait_for(lambda: any(n["down"] for n in client.nodes()), 20, "node001 to show down")
    wait_for(lambda: client.job(on_node001)["state"] == "completed", 90, "the requeued job", detail=client.jobs)
    job = client.job(on_node001)
    assert job["failures"] == 1 and job["attempts"] == 2 and job["placement"] == "node000:1"
    assert "vanished" in job["result"]
