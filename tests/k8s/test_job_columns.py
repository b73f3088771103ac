"""Kubernetes job columns in the generic format (namespace, queue, priority_class, pods,
gpus_per_pod), node labels in the cluster YAML, and the kueue/kai policies reading them."""

from __future__ import annotations

import textwrap

import pytest

from shapeshift.cluster_file import load_cluster_file
from shapeshift.engine.overheads import Overheads
from shapeshift.errors import InputError
from shapeshift.policies.framework.registry import make_policy
from shapeshift.workloads.readers.detect import detect_format, read_workload
from tests.conftest import by_id, jcts, job, run

NO_COST = Overheads(0.0, 0.0)


def _csv(tmp_path, text: str, name: str = "jobs.csv"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def test_table_with_queue_columns_is_generic_and_reads_gangs(tmp_path):
    # No num_gpus: a's GPUs are 2 pods x 4 = 8; b gives no pods (1) x 1 GPU = 1.
    path = _csv(
        tmp_path,
        """
        job_id,submit_time,duration,namespace,queue,priority_class,pods,gpus_per_pod,user,state,start_time
        a,0,100,team-a,user-queue,high,2,4,alice,COMPLETED,5
        b,10,50,team-b,lq,,,1,bob,COMPLETED,12
        """,
    )
    assert detect_format(path) == "generic"
    jobs = {j.job_id: j for j in read_workload(path).jobs()}
    a, b = jobs["a"], jobs["b"]
    assert (a.num_gpus, a.pods, a.gpus_per_pod, a.namespace, a.queue_name, a.priority_class) == (
        8,
        2,
        4,
        "team-a",
        "user-queue",
        "high",
    )
    assert (b.num_gpus, b.pods, b.queue_name, b.priority_class) == (1, 1, "lq", "")


def test_queue_columns_survive_write_and_read(tmp_path):
    path = _csv(tmp_path, "job_id,submit_time,duration,queue,pods,gpus_per_pod\nx,0,10,q1,3,2\n")
    workload = read_workload(path)
    out = tmp_path / "out.csv"
    workload.write(out)
    assert read_workload(out).jobs() == workload.jobs()
    assert workload.jobs()[0].num_gpus == 6


def test_numeric_queue_column_stays_the_recorded_delay(tmp_path):
    # A datacenter log's queue column (seconds waited) is not a queue name.
    path = _csv(tmp_path, "job_id,submit_time,num_gpus,duration,queue\nx,0,1,10,35\n")
    workload = read_workload(path)
    assert workload.frame["queue"].tolist() == [35.0]
    assert workload.jobs()[0].queue_name == ""


def test_helios_like_table_with_queue_names_is_not_helios(tmp_path):
    # Helios needs gpu_num/cpu_num/node_num: a k8s table naming user, vc, state and a queue
    # is still the generic format.
    path = _csv(
        tmp_path,
        "job_id,user,vc,state,submit_time,start_time,end_time,duration,queue,gpus_per_pod,pods\n"
        "x,u,v,COMPLETED,0,1,11,10,lq,1,2\n",
    )
    assert detect_format(path) == "generic"
    assert read_workload(path).jobs()[0].num_gpus == 2


@pytest.mark.parametrize(
    ("header", "row", "field", "message"),
    [
        ("num_gpus,pods,gpus_per_pod", "5,2,2", "num_gpus", "differs from pods x gpus_per_pod = 4"),
        ("num_gpus,pods", "3,2", "pods", "not a whole number of GPUs per pod"),
        ("pods,gpus_per_pod", "0,1", "pods", "must be >= 1"),
        ("pods,gpus_per_pod", "1,x", "gpus_per_pod", "expected a number"),
    ],
)
def test_bad_gang_columns_name_line_and_field(tmp_path, header, row, field, message):
    path = _csv(tmp_path, f"job_id,submit_time,duration,{header}\nok,0,1,{','.join(['1'] * len(header.split(',')))}\n")
    path.write_text(path.read_text() + f"bad,0,1,{row}\n")
    with pytest.raises(InputError, match=message) as err:
        read_workload(path, "generic")
    assert err.value.line == 3 and err.value.field == field


def test_node_labels_in_cluster_yaml(tmp_path):
    path = tmp_path / "cluster.yaml"
    path.write_text("nodes:\n  - {count: 1, gpus: 4, labels: {accel: a100, spot: true}}\n  - {count: 1, gpus: 4}\n")
    cluster = load_cluster_file(path)
    assert cluster.nodes[0].labels == (("accel", "a100"), ("spot", "true"))
    assert cluster.nodes[1].labels == ()


def test_bad_node_labels_name_file_line_field(tmp_path):
    path = tmp_path / "cluster.yaml"
    path.write_text("nodes:\n  - count: 1\n    gpus: 4\n    labels:\n      pool: [a, b]\n")
    with pytest.raises(InputError, match="label 'pool' must have a text value") as err:
        load_cluster_file(path)
    assert err.value.field == "nodes.0.labels" and err.value.line == 4


KUEUE = """
kind: ResourceFlavor
metadata: {name: default-flavor}
---
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: default-flavor
      resources: [{name: nvidia.com/gpu, nominalQuota: 4}]
---
kind: LocalQueue
metadata: {name: main, namespace: ml}
spec: {clusterQueue: cq}
---
kind: WorkloadPriorityClass
metadata: {name: urgent}
value: 1000
"""


def test_kueue_reads_queue_namespace_priority_class_and_gang(tmp_path):
    # cq has 4 GPUs, withinClusterQueue LowerPriority. low (2 pods x 2 = 4 GPUs, priority 0)
    # runs from 0; hi (1 pod x 2, class urgent = 1000) at 10 preempts it (lower priority)
    # and runs 10-30; low needs all 4 GPUs (whole workload) and restarts at 30 with its
    # remaining 90 s: ends at 120.
    path = tmp_path / "kueue.yaml"
    path.write_text(KUEUE)
    jobs = [
        job("low", 0, 4, 100, namespace="ml", queue_name="main", pods=2),
        job("hi", 10, 2, 20, namespace="ml", queue_name="main", priority_class="urgent"),
    ]
    result = run(jobs, "1x4", make_policy("kueue", {"config": str(path)}), overheads=NO_COST)
    assert jcts(result) == {"low": 120, "hi": 20}
    with pytest.raises(InputError, match="priority_class 'rush'"):
        policy = make_policy("kueue", {"config": str(path)})
        run([job("x", 0, 1, 1, queue_name="main", priority_class="rush")], "1x4", policy)


def test_kueue_flavor_node_labels_restrict_placement(tmp_path):
    # Flavor a100 selects nodes labelled accel=a100 (the second node group). The first
    # node is free, but the job admitted on a100 must run on node 1.
    config = tmp_path / "kueue.yaml"
    labelled = "metadata: {name: default-flavor}\nspec: {nodeLabels: {accel: a100}}"
    config.write_text(KUEUE.replace("metadata: {name: default-flavor}", labelled))
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text("nodes:\n  - {count: 1, gpus: 4}\n  - {count: 1, gpus: 4, labels: {accel: a100}}\n")
    policy = make_policy("kueue", {"config": str(config)})
    placed = []
    decide = policy.decide

    def spy(view):
        schedule = decide(view)
        placed.extend(node for a in schedule.changes.values() if a is not None for node, _ in a.placement)
        return schedule

    policy.decide = spy
    jobs = [job("x", 0, 2, 10, queue_name="main", namespace="ml")]
    assert jcts(run(jobs, load_cluster_file(cluster), policy, overheads=NO_COST)) == {"x": 10}
    assert placed == [1]


KAI = """
kind: Queue
metadata: {name: research}
spec: {resources: {gpu: {quota: 4}}}
"""


def test_kai_gang_waits_for_all_pods(tmp_path):
    # 4 GPUs. small (1 GPU, 0-100) runs; gang (2 pods x 2 = 4) at 5 cannot start any pod
    # until small ends at 100 (all pods or none), then runs 100-150: JCT 145.
    path = tmp_path / "kai.yaml"
    path.write_text(KAI)
    jobs = [job("small", 0, 1, 100, queue_name="research"), job("gang", 5, 4, 50, queue_name="research", pods=2)]
    result = run(jobs, "1x4", make_policy("kai", {"config": str(path)}), overheads=NO_COST)
    assert jcts(result) == {"small": 100, "gang": 145}


def test_kai_build_class_preempts_train(tmp_path):
    # docs/priority/README.md example: queue limited to 1 GPU; a train (50) pod runs, a
    # build (100) pod arrives and preempts it (same queue, lower priority).
    path = tmp_path / "kai.yaml"
    path.write_text("kind: Queue\nmetadata: {name: test}\nspec: {resources: {gpu: {quota: 1, limit: 1}}}\n")
    jobs = [
        job("train-pod", 0, 1, 100, queue_name="test", priority_class="train"),
        job("build-pod", 10, 1, 20, queue_name="test", priority_class="build"),
    ]
    result = by_id(run(jobs, "1x4", make_policy("kai", {"config": str(path)}), overheads=NO_COST))
    assert result["build-pod"].first_start == 10 and result["train-pod"].preemptions == 1


@pytest.mark.parametrize(("kw", "field"), [({"queue_name": "nope"}, "queue"), ({"vc": "nope"}, "vc")])
def test_unknown_queue_names_the_column_it_came_from(tmp_path, kw, field):
    path = tmp_path / "kai.yaml"
    path.write_text(KAI)
    with pytest.raises(InputError, match=f"queue 'nope' \\({field}\\)") as err:
        run([job("x", 0, 1, 10, **kw)], "1x4", make_policy("kai", {"config": str(path)}))
    assert err.value.field == field
