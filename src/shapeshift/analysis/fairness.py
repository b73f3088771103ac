"""Slowdown and fairness: the per-job and per-user figures scheduling papers report.

Every figure is computed over completed jobs whose *isolated run time* is known: the
job's recorded ``duration``, its run time on the resources it asked for with the cluster
to itself (trace replays and the Rubick workloads record it). Jobs without one are left
out and counted.

* **slowdown** = JCT / isolated run time (1 = never waited, never slowed).
* **bounded slowdown** = max(JCT, tau) / max(isolated, tau), tau = 10 s (Feitelson et al.,
  "Theory and Practice in Parallel Job Scheduling", JSSPP 1997, Sec. 5: very short jobs
  would otherwise dominate the mean).
* **Jain's fairness index** (Jain, Chiu and Hawe, DEC-TR-301, 1984) over users, or over
  tenants when the trace has no users: J = (sum x)^2 / (n sum x^2) with x_g the mean
  normalised progress 1 / slowdown of group g's jobs. 1 = every group fared the same,
  1/n = one group got everything. ``null`` with fewer than two groups.
* **finish-time fairness** rho (Themis, Mahajan et al., NSDI'20, Sec. 3.1):
  rho = T_shared / T_ideal, where T_ideal is the job's run time on a 1/N share of its
  partition, N the average number of jobs present during its lifetime:
  T_ideal = isolated x max(1, G x N / C) for a job of G GPUs in a partition of C GPUs
  (a share larger than the job's demand does not make it faster). rho <= 1 means the
  job did at least as well as with a fair share; max and mean are reported.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from shapeshift.engine.state import JobState, JobStatus
from shapeshift.model import ClusterSpec

#: Bounded-slowdown threshold (seconds), Feitelson et al. 1997.
BOUNDED_SLOWDOWN_TAU = 10.0


def _mean_p99(values: np.ndarray) -> tuple[float | None, float | None]:
    if values.size == 0:
        return None, None
    return float(values.mean()), float(np.percentile(values, 99))


def jain_index(values: Sequence[float]) -> float | None:
    """(sum x)^2 / (n sum x^2); ``None`` for fewer than two values or all zeros."""
    x = np.asarray(values, dtype=float)
    if x.size < 2 or not np.any(x):
        return None
    return float(x.sum() ** 2 / (x.size * np.square(x).sum()))


def average_presence(partitions: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Per job, the time-averaged number of jobs of its partition present (submitted and
    not yet finished) over its own lifetime [start, end]; 1 for a job of zero length."""
    result = np.ones(starts.size)
    for part in np.unique(partitions):
        members = np.flatnonzero(partitions == part)
        s, e = starts[members], ends[members]
        times = np.concatenate([s, e])
        steps = np.concatenate([np.ones(s.size), -np.ones(s.size)])
        order = np.lexsort((-steps, times))  # arrivals before departures at equal times
        times, steps = times[order], steps[order]
        count = np.cumsum(steps)  # jobs present from times[k] until times[k + 1]
        area = np.concatenate([[0.0], np.cumsum(count[:-1] * np.diff(times))])

        def integral(t: np.ndarray, times: np.ndarray = times, area: np.ndarray = area, count: np.ndarray = count):
            k = np.searchsorted(times, t, side="right") - 1
            return area[k] + count[k] * (t - times[k])

        span = e - s
        inside = integral(e) - integral(s)
        result[members] = np.where(span > 0, inside / np.where(span > 0, span, 1.0), 1.0)
    return np.maximum(result, 1.0)


def fairness_summary(jobs: Sequence[JobStatus], cluster: ClusterSpec) -> dict[str, Any]:
    """The slowdown and fairness fields of ``summary.json`` (see the module docstring)."""
    fields: dict[str, Any] = {
        "avg_slowdown": None,
        "p99_slowdown": None,
        "avg_bounded_slowdown": None,
        "p99_bounded_slowdown": None,
        "fairness_groups": None,
        "jain_fairness": None,
        "ftf_rho_max": None,
        "ftf_rho_mean": None,
    }
    # One pass over the jobs (a summary of a million-job run reads each job once).
    present: list[JobStatus] = []  # every job not rejected
    done: list[JobStatus] = []  # completed, with a known isolated run time
    done_at: list[int] = []  # position of each done job in ``present``
    completed = JobState.COMPLETED
    for j in jobs:
        state = j.state
        if state is JobState.REJECTED:
            continue
        if state is completed and j.end_time is not None and j.spec.duration:
            done_at.append(len(present))
            done.append(j)
        present.append(j)
    if not done:
        return fields
    jct = np.array([j.end_time for j in done]) - np.array([j.spec.submit_time for j in done])
    ideal = np.array([j.spec.duration for j in done], dtype=float)
    slowdown = jct / ideal
    tau = BOUNDED_SLOWDOWN_TAU
    bounded = np.maximum(jct, tau) / np.maximum(ideal, tau)
    fields["avg_slowdown"], fields["p99_slowdown"] = _mean_p99(slowdown)
    fields["avg_bounded_slowdown"], fields["p99_bounded_slowdown"] = _mean_p99(bounded)

    key = "user" if any(j.spec.user for j in done) else ("tenant" if any(j.spec.tenant for j in done) else None)
    if key is not None:
        groups: dict[str, list[float]] = {}
        for j, s in zip(done, (1.0 / slowdown).tolist(), strict=True):
            groups.setdefault(getattr(j.spec, key), []).append(s)
        fields["fairness_groups"] = key
        fields["jain_fairness"] = jain_index([float(np.mean(v)) for _, v in sorted(groups.items())])

    starts = np.array([j.spec.submit_time for j in present])
    ends = np.array([np.nan if j.end_time is None else j.end_time for j in present])
    last = 0.0 if np.isnan(ends).all() else float(np.nanmax(ends))
    unfinished = np.isnan(ends)
    ends[unfinished] = np.maximum(last, starts[unfinished])
    partitions = [j.partition for j in present]
    code = {p: i for i, p in enumerate(sorted(set(partitions)))}
    presence = average_presence(np.array([code[p] for p in partitions]), starts, ends)
    capacity = {p: sum(cluster.nodes[n].gpus for n in nodes) for p, nodes in cluster.partition_nodes().items()}
    n = presence[done_at]
    gpus = np.array([max(j.spec.num_gpus, 1) for j in done], dtype=float)
    share = np.array([capacity.get(j.partition, 0) or 1 for j in done], dtype=float)
    rho = jct / (ideal * np.maximum(1.0, gpus * n / share))
    fields["ftf_rho_max"] = float(rho.max())
    fields["ftf_rho_mean"] = float(rho.mean())
    return fields
