"""``fit``'s node choice against a plain transcription of ``select/cons_tres``'s rule.

The rule (``src/plugins/topology/common/eval_nodes.c``, ``_eval_nodes_consec``, as
``fit``'s docstring states it): weight groups tried cumulatively; usable nodes form runs
of consecutive indexes; a one-node job takes the run of fewest free CPUs (the first on
ties) and in it the node of fewest free CPUs (the first on ties); a multi-node job the
first nodes of the run with enough nodes and the fewest free CPUs (the first on ties),
or the first usable nodes where no run is long enough. The reference below walks the
nodes one by one in plain Python; the cases are random, with whole CPU counts so that
run totals are exact whatever the order of summing.
"""

from __future__ import annotations

import math
import random
import threading

from shapeshift.policies.slurm.fit import _EPS, _at_least, fit
from shapeshift.policies.slurm.plan import Free, Need


def _reference(need: Need, groups: list[list[int]], gpus, cpus, mem, largest: int, excluded: set[int]):
    span = 1 if need.gpus <= largest else math.ceil(need.gpus / largest)
    if span > 1 and need.gpus % span:
        span = next(k for k in range(span, need.gpus + 1) if need.gpus % k == 0)
    share = Need(need.gpus // span, need.cpus / span, need.mem / span)
    allowed: list[int] = []
    for group in groups:
        allowed = sorted(allowed + group)
        usable = [
            n
            for n in allowed
            if n not in excluded
            and gpus[n] >= share.gpus
            and cpus[n] + _EPS >= share.cpus
            and mem[n] + _EPS >= share.mem
        ]
        if len(usable) < span:
            continue
        runs: list[list[int]] = []
        for n in usable:
            if runs and runs[-1][-1] == n - 1:
                runs[-1].append(n)
            else:
                runs.append([n])
        long_enough = [r for r in runs if len(r) >= span]
        if not long_enough:
            return [(n, share) for n in usable[:span]]
        best = min(long_enough, key=lambda r: sum(cpus[n] for n in r))  # min: the first of equals
        if span == 1:
            return [(min(best, key=lambda n: cpus[n]), share)]
        return [(n, share) for n in best[:span]]
    return None


def test_fit_follows_the_rule_on_random_clusters():
    rng = random.Random(7)
    for _ in range(3000):
        n = rng.choice([rng.randint(1, 12), rng.randint(40, 120)])
        gpus = [rng.randint(0, 8) for _ in range(n)]
        cpus = [float(rng.choice([0, 4, 8, 12, 32, 60, 64])) for _ in range(n)]
        mem = [float(rng.choice([0, 64, 128, 512])) for _ in range(n)]
        if rng.random() < 0.5:  # one node range, as a partition of consecutive nodes
            start = rng.randint(0, n - 1)
            groups = [list(range(start, n))]
        else:  # scattered nodes in one or two weight groups
            part = sorted(rng.sample(range(n), rng.randint(1, n)))
            groups = [part] if rng.random() < 0.5 else [part[::2], part[1::2]]
            groups = [g for g in groups if g]
        excluded = set(rng.sample(range(n), rng.randint(0, n // 4))) if rng.random() < 0.3 else set()
        need = Need(rng.choice([1, 2, 3, 4, 8, 16, 24]), float(rng.choice([0, 4, 8, 16])), float(rng.choice([0, 32])))
        got = fit(need, groups, Free(gpus, cpus, mem), 8, excluded or None)
        assert got == _reference(need, groups, gpus, cpus, mem, 8, excluded), (need, groups, gpus, cpus, excluded)


def test_threshold_is_the_least_float_that_passes_the_tolerant_comparison():
    # ``free >= _at_least(a)`` must answer as ``free + 1e-9 >= a`` for every float:
    # the threshold passes and the float just below it does not.
    for amount in (0.0, 1e-10, 1 / 3, 4.0, 7.999999999, 32.0, 1e9 + 0.5, 5e-324):
        x = _at_least(amount)
        assert x + _EPS >= amount
        assert not math.nextafter(x, -math.inf) + _EPS >= amount


def test_fits_over_one_range_length_carry_nothing_from_one_to_the_next():
    # ``fit`` reuses its boolean buffers for every range of the same length: each fit
    # must see only its own free resources. Four nodes, one 1-GPU job, 64 free CPUs on
    # each usable node. First: GPUs free on nodes 0, 2, 3 -> runs [0] (64 CPUs) and
    # [2, 3] (128): node 0. Then GPUs only on node 1 -> node 1 (nothing of the first
    # mask may linger). Then no GPU free -> no fit. Then all free -> one run, every
    # node 64 CPUs: the first, node 0.
    need, groups, cpus, mem = Need(1, 4.0, 32.0), [[0, 1, 2, 3]], [64.0] * 4, [512.0] * 4
    assert fit(need, groups, Free([8, 0, 8, 8], cpus, mem), 8) == [(0, need)]
    assert fit(need, groups, Free([0, 8, 0, 0], cpus, mem), 8) == [(1, need)]
    assert fit(need, groups, Free([0, 0, 0, 0], cpus, mem), 8) is None
    assert fit(need, groups, Free([8, 8, 8, 8], cpus, mem), 8) == [(0, need)]


def test_fits_in_two_threads_do_not_share_buffers():
    # Each thread has its own buffers: two threads fitting over ranges of the same
    # length, each on its own cluster, always get their own answers (node 0 for the
    # first cluster, whose only free GPUs are there; node 999 for the second).
    need, groups, cpus, mem = Need(1, 0.0, 0.0), [list(range(1000))], [64.0] * 1000, [512.0] * 1000
    first = Free([8] + [0] * 999, cpus, mem)
    second = Free([0] * 999 + [8], cpus, mem)
    wrong: list[object] = []

    def run(free: Free, node: int) -> None:
        for _ in range(300):
            got = fit(need, groups, free, 8)
            if got != [(node, need)]:
                wrong.append(got)

    threads = [threading.Thread(target=run, args=(first, 0)), threading.Thread(target=run, args=(second, 999))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []
