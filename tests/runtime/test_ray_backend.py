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
        head_node_args={"num_cpus": 1, "resources": resources["node000"], "include_dashboard": False},
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
    leftover = [a for a in ray.util.list_named_actors(all_namespaces=True) if "shapeshift-" in str(a)]
    assert leftover == []
