"""KAI-Scheduler's fair share: how a resource is divided among a hierarchy of queues.

Source: kai-scheduler/KAI-Scheduler v0.17.0-9 (commit d5bc503),
pkg/scheduler/plugins/proportion/resource_division/resource_division.go, per resource
and per level of the queue tree (proportion.go ``setFairShareForQueues`` divides a
parent's share among its children):

1. deserved: each queue gets ``min(quota, requestable)`` (quota -1: the whole amount);
2. over quota: the rest goes to the highest queue ``priority`` first; within a priority,
   in rounds, to queues not yet satisfied (request or limit reached) in proportion to
   ``max(0, W' + k (W' - U'))`` where ``W'`` is the over-quota weight normalized over the
   unsatisfied queues and ``U'`` the queue's historical usage normalized to cluster
   capacity (time-based fair share; 0 without it, which leaves plain weights); a queue
   asking less than its portion gets what it asks, otherwise the portion rounded down to
   a whole unit, and the rounds repeat while something was left over;
3. the fractions left by rounding go one unit (at most) at a time to the queues with the
   largest remainder, within each priority (``divideRemainingResource``).

docs/fairness/README.md and docs/scheduling-deep-dive/README.md describe the same
(priority "buckets", weight within a bucket). Historical usage follows
docs/time-based-fairshare/README.md: each past allocation decays as
``0.5 ** (age / halfLife)`` and the sum is divided by the cluster's capacity over the
same window, decayed alike.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from shapeshift.k8s.kai_config import UNLIMITED, KaiConfig

Amounts = Mapping[str, float]


def fair_shares(
    config: KaiConfig,
    capacity: Amounts,
    demand: Mapping[str, Amounts],
    usage: Mapping[str, Amounts] | None = None,
) -> dict[str, dict[str, float]]:
    """Fair share of every queue per resource. ``demand``: per leaf queue, what its
    running and pending jobs request; ``usage``: normalized historical usage per queue."""
    usage = usage or {}
    requestable = _requestable(config, demand)
    shares: dict[str, dict[str, float]] = {q: {} for q in config.queues}
    for resource, total in capacity.items():
        _divide_level(config, None, total, resource, requestable, usage, shares)
    return shares


def _requestable(config: KaiConfig, demand: Mapping[str, Amounts]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}

    def visit(name: str) -> dict[str, float]:
        children = config.children(name)
        if children:
            total: dict[str, float] = {}
            for child in children:
                for r, v in visit(child).items():
                    total[r] = total.get(r, 0.0) + v
        else:
            total = dict(demand.get(name, {}))
        queue = config.queues[name]
        for r in list(total):
            limit = queue.resource(r).limit
            if limit != UNLIMITED:
                total[r] = min(total[r], limit)
        out[name] = total
        return total

    for root in config.children(None):
        visit(root)
    return out


def _divide_level(config, parent, amount, resource, requestable, usage, shares) -> None:
    siblings = sorted(config.children(parent))
    if not siblings:
        return
    fair = {q: 0.0 for q in siblings}
    request = {q: requestable[q].get(resource, 0.0) for q in siblings}
    limit = {q: config.queues[q].resource(resource).limit for q in siblings}
    remaining = amount
    for q in siblings:
        deserved = config.queues[q].resource(resource).quota
        if deserved == UNLIMITED:
            deserved = amount
        give = min(deserved, request[q])
        fair[q] += give
        remaining -= give
    if remaining > 0:
        k_value = config.fairness.k_value
        by_priority: dict[int, list[str]] = {}
        for q in siblings:
            by_priority.setdefault(config.queues[q].priority, []).append(q)
        remainders: dict[int, dict[str, float]] = {}
        for prio in sorted(by_priority, reverse=True):
            remaining, remainders[prio] = _up_to_fair_share(
                remaining, by_priority[prio], resource, fair, request, limit, usage, k_value, config
            )
        for prio in sorted(by_priority, reverse=True):
            if remaining <= 0:
                break
            for q in sorted(remainders[prio], key=lambda q: (-remainders[prio][q], q)):
                if remaining <= 0:
                    break
                give = min(1.0, remaining)
                fair[q] += give
                remaining -= give
    for q in siblings:
        shares[q][resource] = fair[q]
        _divide_level(config, q, fair[q], resource, requestable, usage, shares)


def _satisfied(q, fair, request, limit) -> bool:
    return request[q] <= fair[q] or (limit[q] != UNLIMITED and limit[q] <= fair[q])


def _up_to_fair_share(total, queues, resource, fair, request, limit, usage, k_value, config):
    remainders: dict[str, float] = {}
    while True:
        round_amount = total
        open_ = [q for q in queues if request[q] - fair[q] > 0]
        weights_total = sum(config.queues[q].resource(resource).over_quota_weight for q in open_)
        if weights_total == 0:
            break
        share_weight = {}
        for q in queues:
            if _satisfied(q, fair, request, limit):
                continue
            n_weight = config.queues[q].resource(resource).over_quota_weight / weights_total
            n_usage = usage.get(q, {}).get(resource, 0.0)
            share_weight[q] = max(0.0, n_weight + k_value * (n_weight - n_usage))
        weight_sum = sum(share_weight.values())
        if weight_sum == 0:
            break
        another = False
        for q in queues:
            if total == 0:
                break
            if _satisfied(q, fair, request, limit) or config.queues[q].resource(resource).over_quota_weight == 0:
                continue
            wanted = request[q] - fair[q]
            portion = round_amount * share_weight[q] / weight_sum
            if wanted <= portion:
                give = wanted
                remainders.pop(q, None)
            else:
                give = float(math.floor(portion)) if portion >= 1 else 0.0
                if portion - give > 0:
                    remainders[q] = portion - give
            if give == 0:
                continue
            fair[q] += give
            total -= give
            another = another or wanted < portion
        if not another or total == 0:
            break
    return total, remainders


def decayed_usage(
    allocations: Iterable[tuple[str, str, float, float, float]],
    capacity: Amounts,
    now: float,
    *,
    half_life_s: float | None,
    window_s: float,
) -> dict[str, dict[str, float]]:
    """Normalized historical usage per queue and resource from ``(queue, resource, amount,
    start, end)`` allocations: decayed amount x time within the window over the decayed
    capacity x time of the window (docs/time-based-fairshare/README.md)."""
    start = now - window_s

    def weight(a: float, b: float) -> float:
        a, b = max(a, start), min(b, now)
        if b <= a:
            return 0.0
        if half_life_s is None:
            return b - a
        scale = half_life_s / math.log(2)
        return scale * (0.5 ** ((now - b) / half_life_s) - 0.5 ** ((now - a) / half_life_s))

    window = weight(start, now)
    out: dict[str, dict[str, float]] = {}
    for queue, resource, amount, a, b in allocations:
        cap = capacity.get(resource, 0.0)
        if cap <= 0 or window <= 0:
            continue
        per = out.setdefault(queue, {})
        per[resource] = per.get(resource, 0.0) + amount * weight(a, b) / (cap * window)
    return out


def with_ancestors(config: KaiConfig, usage: Mapping[str, Amounts]) -> dict[str, dict[str, float]]:
    """Leaf usage summed up the tree, so parents compete with their siblings on it too."""
    out: dict[str, dict[str, float]] = {}
    for leaf, amounts in usage.items():
        node: str | None = leaf
        while node is not None:
            per = out.setdefault(node, {})
            for r, v in amounts.items():
                per[r] = per.get(r, 0.0) + v
            node = config.queues[node].parent
    return out
