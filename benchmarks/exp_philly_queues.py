"""Philly mapped to queues by virtual cluster: the same jobs under ``kueue`` (one
ClusterQueue per VC, nominal quota = the VC's GPUs, one cohort with borrowing and
reclaim), ``kai`` (one queue per VC, deserved = the VC's GPUs) and Shapeshift's other
policies on one shared pool, plus ``fifo`` on the VCs as hard partitions (no sharing);
per-queue fairness beside average JCT.

Fairness (``shapeshift.k8s.queue_metrics.queue_fairness``, the same for every policy):
Jain's index over the VCs' mean slowdown (JCT / time run; 1 = every VC served alike) and
the worst VC's mean wait to first start. (Each VC's share of the GPU time against its
deserved share is in each kueue/kai run's summary; over a run where every job finishes
it equals the VC's demand under any policy, so it does not tell policies apart here.)

The cut (stated in docs/kueue-kai.md): the first ``--jobs`` jobs of the 11 virtual
clusters (the 18 jobs of 4 tiny VCs left out) on Philly shrunk by ``--scale`` (each VC
keeps its share of the nodes), so that the cut's load contends for the GPUs.

    python benchmarks/exp_philly_queues.py [--jobs 5000] [--scale 4] [--policies ...]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from shapeshift.cluster_file import load_cluster_file
from shapeshift.datasets import lookup
from shapeshift.k8s.queue_metrics import queue_fairness
from shapeshift.k8s.vc_queues import kai_yaml, kueue_yaml, vc_gpus
from shapeshift.model import ClusterSpec
from shapeshift.policies.framework.registry import make_policy
from shapeshift.sim.simulator import simulate
from shapeshift.workloads.readers.detect import read_workload


def shrunk(cluster: ClusterSpec, scale: int) -> ClusterSpec:
    """Every VC with 1/scale of its nodes (at least one), in the same order."""
    sizes = {name: max(1, len(members) // scale) for name, members in cluster.partition_nodes().items() if name}
    nodes = cluster.nodes[: sum(sizes.values())]
    partitions, cursor = {}, 0
    for name, n in sizes.items():
        partitions[name] = tuple(node.name for node in nodes[cursor : cursor + n])
        cursor += n
    return ClusterSpec(nodes, partitions)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--scale", type=int, default=4)
    parser.add_argument("--policies", default="kueue,kai,fifo,tiresias,themis,fifo-vcs")
    args = parser.parse_args()
    vcs = shrunk(load_cluster_file(lookup("philly-vcs")[1]), args.scale)
    deserved = {name: float(g) for name, g in vc_gpus(vcs).items()}
    pool = ClusterSpec(vcs.nodes)  # the same nodes, no partitions
    jobs = [j for j in read_workload("philly").jobs() if j.vc in deserved][: args.jobs]
    folder = Path(tempfile.mkdtemp(prefix="philly-queues-"))
    (folder / "kueue.yaml").write_text(kueue_yaml(vcs))
    (folder / "kai.yaml").write_text(kai_yaml(vcs))
    print(f"philly: first {len(jobs):,} jobs of 11 VCs; {pool.total_gpus} GPUs (Philly / {args.scale})")
    print("| policy | avg JCT (h) | Jain over VC slowdowns | worst VC mean wait (h) | preemptions | wall (s) |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in args.policies.split(","):
        cluster = vcs if name == "fifo-vcs" else pool
        policy_name = "fifo" if name == "fifo-vcs" else name
        params = {"config": str(folder / f"{name}.yaml")} if name in ("kueue", "kai") else {}
        start = time.perf_counter()
        result = simulate(jobs, cluster, make_policy(policy_name, params))
        wall = time.perf_counter() - start
        done = [j for j in result.jobs if j.end_time is not None]
        jct = sum(j.end_time - j.spec.submit_time for j in done) / max(1, len(done)) / 3600
        fair = queue_fairness(result.jobs, deserved)
        preempted = sum(j.preemptions for j in result.jobs)
        label = "fifo (VCs as partitions)" if name == "fifo-vcs" else name
        print(
            f"| {label} | {jct:.2f} | {fair['queues_jain_slowdown']:.3f} | "
            f"{fair['queues_worst_mean_wait_s'] / 3600:.2f} | {preempted:,} | {wall:.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
