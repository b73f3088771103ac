"""Finished Kubernetes Jobs and PyTorchJobs from ``kubectl get jobs,pytorchjobs -A -o json``,
so a site can replay its own history under Kueue or KAI-Scheduler.

Each finished item becomes one job: submitted at ``metadata.creationTimestamp``, started
at ``status.startTime``, ended at ``status.completionTime`` (or the time of its
``Complete``/``Succeeded``/``Failed`` condition), run for end - start. The queue is the
first label found among ``kueue.x-k8s.io/queue-name`` (Kueue,
pkg/controller/constants/constants.go ``QueueLabel``), ``kai.scheduler/queue``
(KAI-Scheduler's ``queueLabelKey``, deployments/kai-scheduler/values.yaml) and
``runai/queue`` (its key before KAI renamed it, CHANGELOG.md), on the object or its pod
template. The priority class is the ``kueue.x-k8s.io/priority-class`` label, a
``priorityClassName`` label (docs/priority/README.md of KAI-Scheduler) or the pod
template's ``priorityClassName``.

Pods and GPUs: a Job runs ``spec.parallelism`` pods (default 1) of its pod template; a
PyTorchJob the sum of ``replicas`` over ``spec.pytorchReplicaSpecs``. A pod's GPUs are
the ``nvidia.com/gpu`` limits (else requests) of its containers; CPUs and memory the same
way, summed over the job. A PyTorchJob whose replica types ask for different GPUs per pod
is read as one pod holding them all (the generic format has one pod size per job).

Items that have not finished (no end time) or never started are left out. A bad item is
one ``InputError`` naming the file, the item's index in ``items`` and the field.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd

from shapeshift.errors import InputError
from shapeshift.k8s.documents import parse_quantity
from shapeshift.workloads.readers.table import MAX_SECONDS, open_text
from shapeshift.workloads.workload import Workload

QUEUE_LABELS = ("kueue.x-k8s.io/queue-name", "kai.scheduler/queue", "runai/queue")
PRIORITY_LABELS = ("kueue.x-k8s.io/priority-class", "priorityClassName")
GPU = "nvidia.com/gpu"
KINDS = ("Job", "PyTorchJob")


def looks_like_kubectl(path: Path) -> bool:
    """Whether the file is JSON (its first non-blank character opens an object)."""
    try:
        with open_text(path) as handle:
            head = handle.read(256)
    except (OSError, UnicodeDecodeError, ValueError, EOFError):
        return False
    return head.lstrip().startswith("{")


class _Item:
    """One item of the list, with where it is, for error messages."""

    def __init__(self, path: Path, index: int, body: Any):
        self.path, self.index = path, index
        if not isinstance(body, Mapping):
            raise self.fail("", "must be an object")
        self.body = body
        meta = body.get("metadata")
        self.meta: Mapping[str, Any] = meta if isinstance(meta, Mapping) else {}
        self.kind = str(body.get("kind", ""))
        self.name = f"{self.meta.get('namespace', '')}/{self.meta.get('name', '')}".lstrip("/")

    def fail(self, field: str, message: str) -> InputError:
        who = f"item {self.index}" + (f" ({self.kind} {self.name})" if getattr(self, "name", "") else "")
        where = f"items[{self.index}]" + (f".{field}" if field else "")
        return InputError(f"{who}: {message}", path=str(self.path), field=where)

    def get(self, dotted: str, kind: type | tuple[type, ...] = Mapping, default: Any = None) -> Any:
        value: Any = self.body
        for part in dotted.split("."):
            if not isinstance(value, Mapping):
                return default
            value = value.get(part)
        if value is None:
            return default
        if not isinstance(value, kind):
            raise self.fail(dotted, f"expected {getattr(kind, '__name__', 'another type')}, got {value!r}")
        return value

    def time(self, dotted: str) -> datetime | None:
        text = self.get(dotted, str)
        if text is None:
            return None
        try:
            stamp = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise self.fail(dotted, f"cannot read time {text!r}; expected an RFC 3339 timestamp") from None
        if stamp.tzinfo is None:
            raise self.fail(dotted, f"time {text!r} has no time zone")
        return stamp


def _pod_resources(item: _Item, template: str) -> dict[str, float]:
    """GPUs, CPUs and memory (GB) of one pod of ``template``."""
    containers = item.get(f"{template}.spec.containers", list, [])
    total = {"gpu": 0.0, "cpu": 0.0, "mem": 0.0}
    for c, container in enumerate(containers):
        where = f"{template}.spec.containers[{c}].resources"
        resources = container.get("resources") if isinstance(container, Mapping) else None
        if not isinstance(resources, Mapping):
            continue
        for name, key, scale in ((GPU, "gpu", 1.0), ("cpu", "cpu", 1.0), ("memory", "mem", 1e-9)):
            for part in ("limits", "requests"):
                amounts = resources.get(part)
                if isinstance(amounts, Mapping) and name in amounts:
                    value = parse_quantity(amounts[name])
                    if value is None or value < 0:
                        raise item.fail(f"{where}.{part}.{name}", f"{amounts[name]!r} is not a quantity")
                    if key == "gpu" and value != int(value):
                        raise item.fail(f"{where}.{part}.{name}", f"{amounts[name]!r} is not a whole number of GPUs")
                    total[key] += value * scale
                    break
    return total


def _replicas(item: _Item, dotted: str, default: int = 1) -> int:
    value = item.get(dotted, int, default)
    if isinstance(value, bool) or value < 0:
        raise item.fail(dotted, f"expected a whole number >= 0, got {value!r}")
    return value


def _shape(item: _Item) -> tuple[int, int, float, float, str]:
    """(pods, GPUs per pod, CPUs, memory GB, the template path holding pod labels)."""
    if item.kind == "Job":
        pods = max(1, _replicas(item, "spec.parallelism"))
        res = _pod_resources(item, "spec.template")
        return pods, int(res["gpu"]), res["cpu"] * pods, res["mem"] * pods, "spec.template"
    specs = item.get("spec.pytorchReplicaSpecs")
    if not specs:
        raise item.fail("spec.pytorchReplicaSpecs", "a PyTorchJob needs replica specs")
    pods, sizes, cpus, mem, first = 0, set(), 0.0, 0.0, ""
    gpus = 0
    for role in sorted(specs):
        n = _replicas(item, f"spec.pytorchReplicaSpecs.{role}.replicas")
        res = _pod_resources(item, f"spec.pytorchReplicaSpecs.{role}.template")
        first = first or f"spec.pytorchReplicaSpecs.{role}.template"
        if n:
            sizes.add(int(res["gpu"]))
        pods += n
        gpus += n * int(res["gpu"])
        cpus += n * res["cpu"]
        mem += n * res["mem"]
    if pods == 0:
        raise item.fail("spec.pytorchReplicaSpecs", "no replicas")
    if len(sizes) > 1:
        return 1, gpus, cpus, mem, first
    return pods, gpus // pods, cpus, mem, first


def _label(item: _Item, template: str, keys: tuple[str, ...]) -> str:
    for where in ("metadata.labels", f"{template}.metadata.labels"):
        labels = item.get(where, Mapping, {})
        for key in keys:
            if key in labels:
                return str(labels[key])
    return ""


def _end(item: _Item) -> tuple[datetime | None, str]:
    done = item.time("status.completionTime")
    conditions = item.get("status.conditions", list, [])
    for c, cond in enumerate(conditions):
        if not isinstance(cond, Mapping) or str(cond.get("status", "")) != "True":
            continue
        kind = cond.get("type")
        if kind in ("Complete", "Succeeded", "Failed"):
            state = "FAILED" if kind == "Failed" else "COMPLETED"
            return done or _cond_time(item, c, cond), state
    return done, "COMPLETED"


def _cond_time(item: _Item, c: int, cond: Mapping[str, Any]) -> datetime | None:
    text = cond.get("lastTransitionTime")
    if text is None:
        return None
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        raise item.fail(f"status.conditions[{c}].lastTransitionTime", f"cannot read time {text!r}") from None


def read_kubectl(path: str | Path) -> Workload:
    """The finished Jobs and PyTorchJobs of a ``kubectl get ... -o json`` dump."""
    path = Path(path)
    if not path.exists():
        raise InputError("workload file not found", path=str(path))
    try:
        with open_text(path) as handle:
            data = json.load(handle)
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON: {exc.msg}", path=str(path), line=exc.lineno) from None
    except (OSError, UnicodeDecodeError, ValueError, EOFError) as exc:
        raise InputError(f"cannot read file: {exc}", path=str(path)) from None
    if isinstance(data, Mapping) and "items" in data:
        items = data["items"]
        if not isinstance(items, list):
            raise InputError("'items' must be a list", path=str(path), field="items")
    elif isinstance(data, Mapping) and "kind" in data:
        items = [data]
    else:
        raise InputError("expected kubectl's JSON: an object with 'items' (a List) or one object", path=str(path))
    rows = []
    for index, body in enumerate(items):
        item = _Item(path, index, body)
        if item.kind not in KINDS:
            raise item.fail("kind", f"unknown kind {item.kind!r}; expected {' or '.join(KINDS)}")
        if not item.meta.get("name"):
            raise item.fail("metadata.name", "missing")
        created = item.time("metadata.creationTimestamp")
        if created is None:
            raise item.fail("metadata.creationTimestamp", "missing")
        start = item.time("status.startTime")
        end, state = _end(item)
        if start is None or end is None:
            continue  # not finished, or never started: nothing to replay
        if start < created:
            raise item.fail("status.startTime", "is before metadata.creationTimestamp")
        if end < start:
            raise item.fail("status.completionTime", "is before status.startTime")
        pods, per_pod, cpus, mem, template = _shape(item)
        rows.append(
            {
                "item": index,
                "job_id": item.name,
                "created": created,
                "start": start,
                "end": end,
                "state": state,
                "name": str(item.meta["name"]),
                "namespace": str(item.meta.get("namespace", "")),
                "queue_name": _label(item, template, QUEUE_LABELS),
                "priority_class": _label(item, template, PRIORITY_LABELS)
                or item.get(f"{template}.spec.priorityClassName", str, ""),
                "pods": pods,
                "num_gpus": pods * per_pod,
                "num_cpus": cpus,
                "mem_gb": mem,
            }
        )
    if not rows:
        raise InputError(f"none of the {len(items)} items has finished (start and end times)", path=str(path))
    frame = pd.DataFrame(rows)
    dup = frame["job_id"].duplicated()
    if dup.any():
        first = frame[dup].iloc[0]
        raise InputError(
            f"item {first['item']}: {first['job_id']} appears twice", path=str(path), field=f"items[{first['item']}]"
        )
    origin = frame["created"].min()
    seconds = {c: (frame[c] - origin).dt.total_seconds() for c in ("created", "start", "end")}
    if float(seconds["end"].max()) > MAX_SECONDS:
        raise InputError(f"the dump spans more than {MAX_SECONDS:g} s", path=str(path))
    out = frame.drop(columns=["item", "created", "start", "end"]).assign(
        submit_time=seconds["created"],
        duration=seconds["end"] - seconds["start"],
        start_time=seconds["start"],
        end_time=seconds["end"],
        queue=seconds["start"] - seconds["created"],
    )
    return Workload.from_frame(path.stem, out)
