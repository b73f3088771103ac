"""The controller's figures for Prometheus (text exposition format 0.0.4) and the dashboard.

Written by hand rather than with ``prometheus_client``: a dozen gauges and one histogram
computed on demand from the store and the node table need no registry, and the format is
a stable, documented plain-text one. Names follow Prometheus' conventions (a
``shapeshift_`` prefix, base units, ``_total`` for counters, ``_seconds`` for time).

Decision latency is measured around the policy's ``decide`` (what a scheduler paper
calls decision time), not around launching processes.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from shapeshift.runtime import store as st

#: Histogram buckets for decision latency, in seconds (1 ms .. 10 s).
BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0)
STATES = (st.QUEUED, st.RUNNING, st.COMPLETED, st.FAILED, st.CANCELLED, st.REJECTED)


class DecisionStats:
    """A thread-safe latency histogram the control loop writes and the API reads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts = [0] * (len(BUCKETS) + 1)
        self.total = 0.0
        self.last = 0.0

    def observe(self, seconds: float) -> None:
        with self._lock:
            self.counts[bisect.bisect_left(BUCKETS, seconds)] += 1
            self.total += seconds
            self.last = seconds

    def snapshot(self) -> tuple[list[int], float, float]:
        with self._lock:
            return list(self.counts), self.total, self.last


def time_decisions(policy: Any, stats: DecisionStats) -> None:
    """Wrap ``policy.decide`` so every call is timed into ``stats`` (no-op if the policy
    object does not allow attributes to be set)."""
    decide: Callable[..., Any] = policy.decide

    def timed(view: Any) -> Any:
        start = time.perf_counter()
        try:
            return decide(view)
        finally:
            stats.observe(time.perf_counter() - start)

    try:
        object.__setattr__(policy, "decide", timed)
    except (AttributeError, TypeError):
        return


@dataclass(frozen=True)
class TenantUsage:
    tenant: str
    running_jobs: int
    queued_jobs: int
    gpus: int
    quota: int | None


def tenant_usage(jobs: list[dict[str, Any]], quotas: dict[str, int]) -> list[TenantUsage]:
    """GPUs held and jobs waiting per tenant (``""`` is jobs without a tenant)."""
    names = sorted({j["tenant"] for j in jobs if j["state"] in (st.RUNNING, st.QUEUED)} | set(quotas))
    rows = []
    for name in names:
        mine = [j for j in jobs if j["tenant"] == name]
        running = [j for j in mine if j["state"] == st.RUNNING]
        rows.append(
            TenantUsage(
                tenant=name,
                running_jobs=len(running),
                queued_jobs=sum(1 for j in mine if j["state"] == st.QUEUED),
                gpus=sum(int(j["gpus"] or 0) for j in running),
                quota=quotas.get(name),
            )
        )
    return rows


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def render(
    jobs: list[dict[str, Any]], nodes: list[dict[str, Any]], quotas: dict[str, int], stats: DecisionStats | None
) -> str:
    """The exposition text for ``GET /metrics``."""
    out: list[str] = []

    def metric(name: str, kind: str, help_text: str, samples: list[tuple[str, float]]) -> None:
        out.append(f"# HELP {name} {help_text}")
        out.append(f"# TYPE {name} {kind}")
        out.extend(f"{name}{labels} {value:g}" for labels, value in samples)

    by_state = {s: sum(1 for j in jobs if j["state"] == s) for s in STATES}
    metric("shapeshift_queue_length", "gauge", "Jobs waiting to run.", [("", by_state[st.QUEUED])])
    metric("shapeshift_running_jobs", "gauge", "Jobs holding GPUs.", [("", by_state[st.RUNNING])])
    metric("shapeshift_jobs", "gauge", "Jobs by state.", [(f'{{state="{s}"}}', n) for s, n in by_state.items()])
    metric("shapeshift_gpus", "gauge", "GPU slots of the cluster.", [("", sum(n["gpus"] for n in nodes))])
    metric("shapeshift_gpus_allocated", "gauge", "GPU slots held by runs.", [("", sum(n["used"] for n in nodes))])
    metric(
        "shapeshift_node_gpus_allocated",
        "gauge",
        "GPU slots held per node.",
        [(f'{{node="{_label(n["name"])}"}}', n["used"]) for n in nodes],
    )
    usage = tenant_usage(jobs, quotas)
    metric(
        "shapeshift_tenant_gpus_allocated",
        "gauge",
        "GPU slots held by each tenant's running jobs.",
        [(f'{{tenant="{_label(u.tenant)}"}}', u.gpus) for u in usage],
    )
    metric(
        "shapeshift_tenant_queued_jobs",
        "gauge",
        "Jobs waiting per tenant.",
        [(f'{{tenant="{_label(u.tenant)}"}}', u.queued_jobs) for u in usage],
    )
    metric(
        "shapeshift_tenant_gpu_quota",
        "gauge",
        "Guaranteed GPUs per tenant (cluster file).",
        [(f'{{tenant="{_label(u.tenant)}"}}', u.quota) for u in usage if u.quota is not None],
    )
    if stats is not None:
        counts, total, _ = stats.snapshot()
        samples, running = [], 0
        for bound, count in zip((*BUCKETS, float("inf")), counts, strict=True):
            running += count
            le = "+Inf" if bound == float("inf") else f"{bound:g}"
            samples.append((f'_bucket{{le="{le}"}}', running))
        out.append("# HELP shapeshift_decision_seconds Time the policy took per scheduling decision.")
        out.append("# TYPE shapeshift_decision_seconds histogram")
        out.extend(f"shapeshift_decision_seconds{labels} {value:g}" for labels, value in samples)
        out.append(f"shapeshift_decision_seconds_sum {total:.9g}")
        out.append(f"shapeshift_decision_seconds_count {running}")
    return "\n".join(out) + "\n"
