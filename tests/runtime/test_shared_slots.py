"""Two jobs on one GPU, live: on a cluster whose ``gpu_share_limit`` lets jobs share GPUs,
the ranks of jobs a policy puts on the same GPU run at the same time on the same slot
(the same ``CUDA_VISIBLE_DEVICES`` where GPUs exist), as the simulator runs them."""

from __future__ import annotations

from shapeshift.model import Allocation, Resources, Schedule
from tests.runtime.conftest import demo_job, wait_for

CLUSTER = """\
nodes:
  - name: node000
    gpus: 1
    cpus: 16
    mem_gb: 64
    gpu_mem_gb: 16
gpu_share_limit: 2
"""


class PairOnGpuZero:
    """Puts every waiting 1-GPU job on GPU 0 of node 0 with 8 GB of its 16 GB, as long as
    the ledger lets it join (at most two jobs, within the memory)."""

    name = "pair-test"
    triggers = frozenset({"arrival", "completion"})
    default_round = None

    def decide(self, view):
        changes: dict[str, Allocation | None] = {}
        on_gpu = len(view.sharing.occupants(0, 0))
        for job_id in list(view.pending("")):
            if on_gpu >= 2:
                break
            changes[job_id] = Allocation(((0, Resources(1)),), devices=((0, 0),), gpu_mem_gb=8.0)
            on_gpu += 1
        return Schedule(base=view.allocations, changes=changes)


def test_two_jobs_a_policy_pairs_on_one_gpu_run_together_on_its_slot(live, tmp_path):
    cluster = tmp_path / "shared.yaml"
    cluster.write_text(CLUSTER)
    controller, client = live(str(cluster), policy_obj=PairOnGpuZero())
    ids = [client.submit(demo_job(f"job{i}", iterations=15, iter_time=0.1)) for i in range(3)]
    together: list[list[dict]] = []

    def both_running() -> bool:
        running = [j for j in client.jobs() if j["state"] == "running"]
        if len(running) == 2:
            together.append(client.nodes())
        return len(running) == 2

    # One GPU, three jobs: the first two share it (the limit is two), the third waits.
    wait_for(both_running, 30, "the first two jobs to run at once")
    node = together[0][0]
    assert node["jobs"] == ["1", "2"] and node["used"] == 1 and node["free"] == 0
    runs = {r.job_id: r for r in controller.store.runs()}
    assert [rank["slots"] for rank in runs["1"].ranks] == [[0]]
    assert [rank["slots"] for rank in runs["2"].ranks] == [[0]]
    wait_for(
        lambda: all(j["state"] == "completed" for j in client.jobs()),
        60,
        "all three jobs to complete",
        detail=lambda: [(j["id"], j["state"], j["reason"]) for j in client.jobs()],
    )
    rows = {j["id"]: j for j in client.jobs()}
    assert rows[ids[2]]["first_start"] >= min(rows["1"]["end_time"], rows["2"]["end_time"]) - 0.01
