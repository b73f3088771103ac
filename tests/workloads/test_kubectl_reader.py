"""``--format kubectl``: finished Jobs and PyTorchJobs from ``kubectl get ... -o json``."""

from __future__ import annotations

import copy
import json

import pytest

from shapeshift.errors import InputError
from shapeshift.workloads.readers.detect import detect_format, read_workload

JOB = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {
        "name": "sample-job",
        "namespace": "team-a",
        "creationTimestamp": "2026-01-01T10:00:00Z",
        "labels": {"kueue.x-k8s.io/queue-name": "user-queue", "kueue.x-k8s.io/priority-class": "high"},
    },
    "spec": {
        "parallelism": 3,
        "completions": 3,
        "template": {
            "spec": {
                "containers": [
                    {"name": "main", "resources": {"limits": {"nvidia.com/gpu": "2", "cpu": "4", "memory": "16Gi"}}}
                ]
            }
        },
    },
    "status": {"startTime": "2026-01-01T10:01:00Z", "completionTime": "2026-01-01T10:11:00Z"},
}

# KAI-Scheduler's docs/batch/pytorch-job.yaml: 1 Master + 2 Workers of 1 GPU each.
PYTORCH = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "PyTorchJob",
    "metadata": {
        "name": "pytorch-dist-mnist-nccl",
        "namespace": "research",
        "creationTimestamp": "2026-01-01T10:05:00+00:00",
        "labels": {"kai.scheduler/queue": "default-queue"},
    },
    "spec": {
        "pytorchReplicaSpecs": {
            role: {
                "replicas": n,
                "template": {
                    "spec": {"containers": [{"name": "pytorch", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}
                },
            }
            for role, n in (("Master", 1), ("Worker", 2))
        }
    },
    "status": {
        "startTime": "2026-01-01T10:06:00Z",
        "conditions": [
            {"type": "Created", "status": "True", "lastTransitionTime": "2026-01-01T10:05:00Z"},
            {"type": "Succeeded", "status": "True", "lastTransitionTime": "2026-01-01T10:36:00Z"},
        ],
    },
}

RUNNING = {
    **copy.deepcopy(JOB),
    "metadata": {**JOB["metadata"], "name": "still-running"},
    "status": {"startTime": "2026-01-01T10:02:00Z"},
}


def _dump(tmp_path, items, name="jobs.json"):
    path = tmp_path / name
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}, indent=1))
    return path


def test_dump_is_detected_and_read(tmp_path):
    path = _dump(tmp_path, [JOB, PYTORCH, RUNNING])
    assert detect_format(path) == "kubectl"
    frame = read_workload(path).frame.set_index("job_id")
    # The Job: created 10:00 (the origin), started 10:01, done 10:11: submit 0, wait 60 s,
    # runs 600 s; 3 pods x 2 GPUs = 6, 3 x 4 CPUs = 12, 3 x 16 GiB = 51.54 GB.
    job = frame.loc["team-a/sample-job"]
    assert (job.submit_time, job.duration, job.queue, job.num_gpus, job.pods) == (0, 600, 60, 6, 3)
    assert (job.namespace, job.queue_name, job.priority_class, job.state) == (
        "team-a",
        "user-queue",
        "high",
        "COMPLETED",
    )
    assert job.num_cpus == 12 and job.mem_gb == pytest.approx(3 * 16 * 2**30 / 1e9)
    # The PyTorchJob: created 10:05 (300 s), started 10:06, Succeeded at 10:36: 1800 s;
    # 3 pods x 1 GPU; queue from KAI's label.
    torch = frame.loc["research/pytorch-dist-mnist-nccl"]
    assert (torch.submit_time, torch.duration, torch.num_gpus, torch.pods, torch.queue_name) == (
        300,
        1800,
        3,
        3,
        "default-queue",
    )
    assert "team-a/still-running" not in frame.index  # not finished: left out


@pytest.mark.parametrize(
    ("edit", "field", "message"),
    [
        (lambda j: j.update(kind="Deployment"), "items[1].kind", "unknown kind 'Deployment'"),
        (lambda j: j["status"].update(startTime="yesterday"), "items[1].status.startTime", "cannot read time"),
        (
            lambda j: j["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"].update(
                {"nvidia.com/gpu": "1.5"}
            ),
            "items[1].spec.template.spec.containers[0].resources.limits.nvidia.com/gpu",
            "not a whole number of GPUs",
        ),
        (lambda j: j["spec"].update(parallelism="two"), "items[1].spec.parallelism", "expected int"),
        (
            lambda j: j["status"].update(completionTime="2026-01-01T09:00:00Z"),
            "items[1].status.completionTime",
            "before",
        ),
    ],
)
def test_bad_item_names_file_index_and_field(tmp_path, edit, field, message):
    bad = copy.deepcopy(JOB)
    bad["metadata"]["name"] = "bad"
    edit(bad)
    path = _dump(tmp_path, [JOB, bad])
    with pytest.raises(InputError, match=message) as err:
        read_workload(path, "kubectl")
    assert err.value.field == field and err.value.path == str(path)
    assert "item 1" in err.value.message


def test_not_json_is_one_error(tmp_path):
    path = tmp_path / "jobs.json"
    path.write_text('{"items": [}')
    with pytest.raises(InputError, match="not valid JSON") as err:
        read_workload(path)
    assert err.value.line == 1


def test_nothing_finished_is_an_error(tmp_path):
    with pytest.raises(InputError, match="none of the 1 items has finished"):
        read_workload(_dump(tmp_path, [RUNNING]))
