"""Queue configurations derived from a cluster's virtual clusters (partitions), so a
trace that names each job's virtual cluster (Philly) replays under Kueue or KAI as a site
would set them up when moving those teams onto one shared pool:

* Kueue: one ResourceFlavor, one ClusterQueue per virtual cluster with ``nominalQuota``
  = the GPUs of its partition, all in one cohort (unused quota is lent; a queue may
  borrow without limit), ``reclaimWithinCohort: Any`` so a queue gets its nominal quota
  back by evicting borrowers, ``withinClusterQueue: LowerPriority``; and one LocalQueue
  per virtual cluster (namespace = the virtual cluster's name).
* KAI-Scheduler: one queue per virtual cluster under one parent, ``quota`` (deserved) =
  its partition's GPUs, ``overQuotaWeight`` = the same, so over-quota GPUs go out in
  proportion to what a queue deserves; no limit.

The replay then runs on the cluster without its partitions (every node in one pool):
quota, not node ownership, is what separates the teams.
"""

from __future__ import annotations

from shapeshift.model import ClusterSpec


def vc_gpus(cluster: ClusterSpec) -> dict[str, int]:
    """GPUs of each named partition."""
    return {
        name: sum(cluster.nodes[i].gpus for i in members) for name, members in cluster.partition_nodes().items() if name
    }


def kueue_yaml(cluster: ClusterSpec, gpu_resource: str = "nvidia.com/gpu", cohort: str = "all-vcs") -> str:
    docs = ["apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata:\n  name: default-flavor\n"]
    for name, gpus in vc_gpus(cluster).items():
        docs.append(
            "apiVersion: kueue.x-k8s.io/v1beta2\n"
            "kind: ClusterQueue\n"
            f"metadata:\n  name: vc-{name}\n"
            "spec:\n"
            "  namespaceSelector: {}\n"
            f"  cohortName: {cohort}\n"
            "  preemption:\n    reclaimWithinCohort: Any\n    withinClusterQueue: LowerPriority\n"
            f"  resourceGroups:\n  - coveredResources: [{gpu_resource}]\n    flavors:\n"
            f"    - name: default-flavor\n      resources:\n      - name: {gpu_resource}\n"
            f"        nominalQuota: {gpus}\n"
        )
        docs.append(
            "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\n"
            f'metadata:\n  name: "{name}"\n  namespace: "{name}"\n'
            f"spec:\n  clusterQueue: vc-{name}\n"
        )
    return "---\n".join(docs)


def kai_yaml(cluster: ClusterSpec, parent: str = "all-vcs") -> str:
    gpus = vc_gpus(cluster)
    docs = [
        "apiVersion: scheduling.run.ai/v2\nkind: Queue\n"
        f"metadata:\n  name: {parent}\n"
        f"spec:\n  resources:\n    gpu: {{quota: {sum(gpus.values())}, limit: -1, overQuotaWeight: 1}}\n"
    ]
    for name, n in gpus.items():
        docs.append(
            "apiVersion: scheduling.run.ai/v2\nkind: Queue\n"
            f'metadata:\n  name: "{name}"\n'
            f"spec:\n  parentQueue: {parent}\n"
            f"  resources:\n    gpu: {{quota: {n}, limit: -1, overQuotaWeight: {n}}}\n"
        )
    return "---\n".join(docs)
