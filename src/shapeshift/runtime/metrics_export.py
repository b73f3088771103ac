"""The controller's figures for Prometheus (text exposition format 0.0.4) and the dashboard.

The figures are computed on demand from the store and the node table, so they are handed
to ``prometheus_client`` as a custom collector (metric families built per scrape) in a
registry of their own, and ``prometheus_client`` writes the exposition text: escaping,
number formatting and the histogram's cumulative buckets are its job, not ours. Names
follow Prometheus' conventions (a ``shapeshift_`` prefix, base units, ``_seconds`` for
time).

Decision latency is measured around the policy's ``decide`` (what a scheduler paper
calls decision time), not around launching processes.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString

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


class _Figures:
    """A ``prometheus_client`` collector over one snapshot of the controller's figures."""

    def __init__(
        self,
        jobs: list[dict[str, Any]],
        nodes: list[dict[str, Any]],
        quotas: dict[str, int],
        stats: DecisionStats | None,
    ):
        self.jobs, self.nodes, self.quotas, self.stats = jobs, nodes, quotas, stats

    def collect(self) -> Iterator[Metric]:
        jobs, nodes = self.jobs, self.nodes
        by_state = {s: sum(1 for j in jobs if j["state"] == s) for s in STATES}
        yield GaugeMetricFamily("shapeshift_queue_length", "Jobs waiting to run.", value=by_state[st.QUEUED])
        yield GaugeMetricFamily("shapeshift_running_jobs", "Jobs holding GPUs.", value=by_state[st.RUNNING])
        per_state = GaugeMetricFamily("shapeshift_jobs", "Jobs by state.", labels=["state"])
        for state, count in by_state.items():
            per_state.add_metric([state], count)
        yield per_state
        yield GaugeMetricFamily("shapeshift_gpus", "GPU slots of the cluster.", value=sum(n["gpus"] for n in nodes))
        yield GaugeMetricFamily(
            "shapeshift_gpus_allocated", "GPU slots held by runs.", value=sum(n["used"] for n in nodes)
        )
        per_node = GaugeMetricFamily("shapeshift_node_gpus_allocated", "GPU slots held per node.", labels=["node"])
        for node in nodes:
            per_node.add_metric([node["name"]], node["used"])
        yield per_node
        usage = tenant_usage(jobs, self.quotas)
        held = GaugeMetricFamily(
            "shapeshift_tenant_gpus_allocated", "GPU slots held by each tenant's running jobs.", labels=["tenant"]
        )
        queued = GaugeMetricFamily("shapeshift_tenant_queued_jobs", "Jobs waiting per tenant.", labels=["tenant"])
        quota = GaugeMetricFamily(
            "shapeshift_tenant_gpu_quota", "Guaranteed GPUs per tenant (cluster file).", labels=["tenant"]
        )
        for u in usage:
            held.add_metric([u.tenant], u.gpus)
            queued.add_metric([u.tenant], u.queued_jobs)
            if u.quota is not None:
                quota.add_metric([u.tenant], u.quota)
        yield from (held, queued, quota)
        if self.stats is not None:
            counts, total, _ = self.stats.snapshot()
            buckets, running = [], 0
            for bound, count in zip((*BUCKETS, float("inf")), counts, strict=True):
                running += count
                buckets.append((floatToGoString(bound), running))
            yield HistogramMetricFamily(
                "shapeshift_decision_seconds",
                "Time the policy took per scheduling decision.",
                buckets=buckets,
                sum_value=total,
            )


def render(
    jobs: list[dict[str, Any]], nodes: list[dict[str, Any]], quotas: dict[str, int], stats: DecisionStats | None
) -> str:
    """The exposition text for ``GET /metrics``."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Figures(jobs, nodes, quotas, stats))
    return generate_latest(registry).decode("utf-8")
