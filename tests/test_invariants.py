"""Property tests over random small traces, for every placement and FIFO variant."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shapeshift.cluster import shorthand_cluster
from shapeshift.engine.contract import traits_of
from shapeshift.engine.overheads import Overheads
from shapeshift.engine.state import JobState
from shapeshift.model import JobSpec
from shapeshift.policies.framework.registry import make_policy, registry
from shapeshift.sim.simulator import hand_replay, simulate


class Checked:
    """Wraps a policy and checks, at every decision, that the engine's books balance:
    free resources per node are never negative and equal capacity minus what running
    jobs hold."""

    def __init__(self, inner):
        hand_replay(inner)  # auto plans by simulating; simulate hands it only to this wrapper
        self.inner = inner
        self.name = inner.name
        self.triggers = inner.triggers
        self.default_round = inner.default_round
        self.traits = traits_of(inner)
        self.checks = 0

    def decide(self, view):
        free = view.free()
        held = np.zeros_like(free.gpus)
        for alloc in view.allocations.values():
            for node, res in alloc.placement:
                held[node] += res.gpus
        assert (free.gpus >= 0).all() and (free.cpus >= -1e-9).all() and (free.mem >= -1e-9).all()
        assert (free.gpus + held == free.gpu_capacity).all()
        self.checks += 1
        return self.inner.decide(view)


@st.composite
def traces(draw):
    nodes = draw(st.integers(1, 3))
    gpus = draw(st.sampled_from([1, 2, 4, 8]))
    n = draw(st.integers(1, 14))
    jobs = []
    for i in range(n):
        jobs.append(
            JobSpec(
                job_id=f"j{i}",
                submit_time=float(draw(st.integers(0, 200))),
                num_gpus=draw(st.integers(1, nodes * gpus)),
                duration=float(draw(st.integers(0, 300))),
                num_cpus=float(draw(st.sampled_from([0, 1, 4]))),
            )
        )
    return nodes, gpus, jobs


POLICY_VARIANTS = [
    (name, args)
    for name in registry()
    for args in (
        [{}] if name != "fifo" else [{}, {"backfill": "true"}, {"placement": "scattered"}, {"placement": "first-fit"}]
    )
]


def _refused_by_its_rule(policy, status, cluster) -> bool:
    """A job may end rejected only where the policy declares a rule that refuses it
    (``PolicyTraits.refuses``: Slurm's equal per-node split), with that rule's reason."""
    refuses = traits_of(policy).refuses
    if status.state is not JobState.REJECTED or refuses is None:
        return False
    return status.reject_reason == refuses(status.spec, cluster, range(len(cluster.nodes)))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=traces(), variant=st.sampled_from(POLICY_VARIANTS), penalty=st.sampled_from([0.0, 30.0]))
def test_invariants_hold_for_every_policy(trace, variant, penalty):
    nodes, gpus, jobs = trace
    name, args = variant
    policy = Checked(make_policy(name, args))
    result = simulate(jobs, shorthand_cluster(nodes, gpus), policy, overheads=Overheads(0.0, penalty))
    assert policy.checks > 0
    assert len(result.jobs) == len(jobs)
    assert sorted(j.job_id for j in result.jobs) == sorted(j.job_id for j in jobs)  # each job exactly once
    cluster = shorthand_cluster(nodes, gpus)
    for status in result.jobs:
        if _refused_by_its_rule(policy, status, cluster):
            continue
        assert status.state is JobState.COMPLETED, status
        assert status.end_time >= status.spec.submit_time
        assert status.first_start >= status.spec.submit_time
        assert status.end_time - status.spec.submit_time >= status.spec.duration - 1e-9
        assert status.work_done == status.work_total


def test_every_job_completes_exactly_once_under_preemption():
    # Many short arrivals preempting long jobs: completions must never be double-counted.
    from tests.sim.test_simulator_exact import _srtf

    jobs = [JobSpec(f"j{i}", float(i * 3), 1 + i % 2, float(50 + (i * 37) % 200)) for i in range(40)]
    result = simulate(jobs, shorthand_cluster(1, 2), _srtf())
    assert all(j.state is JobState.COMPLETED for j in result.jobs)
    assert sum(j.preemptions for j in result.jobs) > 0


class CheckedSharing(Checked):
    """On a cluster that lets jobs share GPUs: no GPU holds more jobs than the limit or
    more memory than it has, and the free count is the number of empty GPUs."""

    def decide(self, view):
        ledger = view.sharing
        free = view.free()
        for node, gpus in enumerate(ledger.holders):
            cap = view.cluster.nodes[node].gpu_mem_gb
            for held in gpus:
                assert len(held) <= view.cluster.gpu_share_limit
                assert sum(held.values()) <= cap + 1e-9
            assert free.gpus[node] == sum(1 for held in gpus if not held)
        assert (free.cpus >= -1e-9).all() and (free.mem >= -1e-9).all()
        self.checks += 1
        return self.inner.decide(view)


SHARING_POLICIES = sorted(registry())


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=traces(), name=st.sampled_from(SHARING_POLICIES), limit=st.sampled_from([2, 3]))
def test_sharing_never_exceeds_memory_or_the_per_gpu_limit(trace, name, limit):
    from dataclasses import replace

    from shapeshift.model import ClusterSpec

    nodes, gpus, jobs = trace
    base = shorthand_cluster(nodes, gpus)
    small = tuple(replace(n, gpu_mem_gb=24.0) for n in base.nodes)
    # Models with known sharing profiles, so policies that pack have something to pack.
    models = ("resnet18", "ncf", "a3c", "resnet50", "vgg16", "")
    jobs = [replace(j, model=models[i % len(models)]) for i, j in enumerate(jobs)]
    policy = CheckedSharing(make_policy(name, {}))
    result = simulate(jobs, ClusterSpec(small, gpu_share_limit=limit), policy)
    assert policy.checks > 0
    cluster = ClusterSpec(small, gpu_share_limit=limit)
    assert all(
        status.state is JobState.COMPLETED or _refused_by_its_rule(policy, status, cluster) for status in result.jobs
    )
