"""GPU-type constraints and fractional GPUs under every policy's own placement, on a
cluster of two nodes of two GPU types (A and B, 2 GPUs each).

The engine refuses (``PolicyError``) an allocation on a type the job excludes, and one
that gives a fraction a whole GPU (or a whole-GPU policy a share) against the policy's
declared ``PolicyTraits.whole_gpus``; a run that completes has therefore placed every job
by the rule. The expectations below are the rules' own consequences, not our output.
"""

from __future__ import annotations

import pytest

from shapeshift.engine.contract import PolicyError, traits_of
from shapeshift.engine.fractions import TypedGroups, allowed_nodes, whole_gpu_spec
from shapeshift.engine.overheads import Overheads
from shapeshift.engine.state import JobState
from shapeshift.model import Allocation, ClusterSpec, JobSpec, NodeSpec, Resources, Schedule
from shapeshift.policies.framework.base import ARRIVAL, COMPLETION
from shapeshift.policies.framework.registry import make_policy
from shapeshift.sim.simulator import simulate

#: Policies with placement code of their own, and two of the composed ones.
EVERY = ("fifo", "tiresias", "lucid", "antman", "rubick", "synergy", "pollux", "sia", "gavel", "slurm", "kueue", "kai")
#: Those whose source allocates whole GPUs only: a fraction of a GPU gets a whole one.
WHOLE = ("tiresias", "antman", "rubick", "synergy", "pollux", "sia", "gavel", "slurm", "kueue")
#: Those that place a fraction as a share of one GPU (KAI's gpu-fraction; Lucid and FIFO
#: through the framework placements).
SHARES = ("fifo", "lucid", "kai")

NO_OVERHEAD = Overheads(0.0, 0.0)


def node(name: str, gpu_type: str, gpus: int = 2) -> NodeSpec:
    return NodeSpec(name, gpus=gpus, cpus=32.0, mem_gb=128.0, gpu_type=gpu_type)


def job(job_id: str, **kw) -> JobSpec:
    return JobSpec(job_id, 0.0, 1, duration=100.0, model="resnet50", **kw)


def run(name: str, jobs: list[JobSpec], cluster: ClusterSpec) -> dict:
    result = simulate(jobs, cluster, make_policy(name), overheads=NO_OVERHEAD)
    return {j.job_id: j for j in result.jobs}


@pytest.mark.parametrize("fractions", [False, True])
@pytest.mark.parametrize("name", EVERY)
def test_a_job_constrained_to_b_never_lands_on_a(name: str, fractions: bool) -> None:
    # Three 1-GPU jobs allow only B; node a0 (A) stays idle. B has 2 GPUs, so at most two
    # of them run at once: at time 0 no more than two start, and the third starts only
    # when one has ended (each runs 100 s, never preempted by another B job's arrival:
    # all arrive at 0). An allocation on a0 would stop the run with PolicyError.
    cluster = ClusterSpec((node("a0", "A"), node("b0", "B")), gpu_fractions=fractions)
    jobs = [job(j, gpu_types=frozenset({"B"})) for j in ("J1", "J2", "J3")]
    out = run(name, jobs, cluster)
    assert all(out[j].state is JobState.COMPLETED for j in ("J1", "J2", "J3"))
    starts = sorted(out[j].first_start for j in ("J1", "J2", "J3"))
    ends = sorted(out[j].end_time for j in ("J1", "J2", "J3"))
    assert starts[2] >= ends[0] - 1e-9


@pytest.mark.parametrize("name", EVERY)
def test_a_job_whose_type_exists_nowhere_is_rejected_with_the_reason(name: str) -> None:
    # C is on no node: the job can never run, whatever the policy, and is rejected on
    # arrival with the types the cluster has; the other job runs.
    cluster = ClusterSpec((node("a0", "A"), node("b0", "B")))
    out = run(name, [job("C1", gpu_types=frozenset({"C"})), job("J1")], cluster)
    assert out["C1"].state is JobState.REJECTED
    assert out["C1"].reject_reason == "asks for GPU type C but the cluster has only A, B"
    assert out["J1"].state is JobState.COMPLETED


@pytest.mark.parametrize("name", WHOLE)
def test_a_fraction_under_a_whole_gpu_policy_takes_one_gpu(name: str) -> None:
    # One node, one GPU. F1 and F2 ask for half a GPU each: 500 + 500 would share the
    # GPU, but a whole-GPU policy gives each a whole GPU, so they run one after the other.
    cluster = ClusterSpec((node("n0", "A", gpus=1),), gpu_fractions=True)
    assert traits_of(make_policy(name)).whole_gpus
    out = run(name, [job("F1", gpu_milli=500), job("F2", gpu_milli=500)], cluster)
    first, second = sorted((out["F1"], out["F2"]), key=lambda s: s.first_start)
    assert first.state is second.state is JobState.COMPLETED
    assert second.first_start >= first.end_time - 1e-9


@pytest.mark.parametrize("name", SHARES)
def test_a_fraction_under_a_sharing_policy_shares_the_gpu(name: str) -> None:
    # The same two halves under a policy that places shares: 500 + 500 = 1000 fits one
    # GPU, so both start at 0 and end at 100.
    cluster = ClusterSpec((node("n0", "A", gpus=1),), gpu_fractions=True)
    assert not traits_of(make_policy(name)).whole_gpus
    out = run(name, [job("F1", gpu_milli=500), job("F2", gpu_milli=500)], cluster)
    assert [(out[j].first_start, out[j].end_time) for j in ("F1", "F2")] == [(0.0, 100.0), (0.0, 100.0)]


class _WholeForFraction:
    """Gives every waiting job one whole GPU of node 0 without declaring whole_gpus."""

    name = "whole-for-fraction"
    triggers = frozenset({ARRIVAL, COMPLETION})
    default_round = None

    def decide(self, view):  # type: ignore[no-untyped-def]
        pending = [j for p in view.partitions for j in view.pending(p)]
        changes = {j: Allocation(((0, Resources(1, 0.0, 0.0)),)) for j in pending[:1]}
        return Schedule(base=view.allocations, changes=changes)


def test_the_engine_refuses_a_whole_gpu_for_a_fraction_from_a_policy_that_does_not_declare_it() -> None:
    cluster = ClusterSpec((node("n0", "A", gpus=1),), gpu_fractions=True)
    with pytest.raises(PolicyError, match="gives a whole GPU for its fraction"):
        simulate([job("F1", gpu_milli=500)], cluster, _WholeForFraction(), overheads=NO_OVERHEAD)


def test_allowed_nodes_and_typed_groups_keep_the_allowed_types_in_order() -> None:
    # Nodes 0..3 of types A, B, A, C; a job allowing A and C keeps 0, 2, 3; groups
    # [[0, 1], [2, 3]] become [[0], [2, 3]], the largest of them node 3 (4 GPUs).
    cluster = ClusterSpec((node("a", "A"), node("b", "B"), node("a2", "A"), node("c", "C", gpus=4)))
    types = [n.gpu_type for n in cluster.nodes]
    spec = job("X", gpu_types=frozenset({"A", "C"}))
    assert allowed_nodes(spec, [0, 1, 2, 3], types) == [0, 2, 3]
    plain = [0, 1, 2, 3]
    assert allowed_nodes(job("Y"), plain, types) is plain
    groups = [[0, 1], [2, 3]]
    typed = TypedGroups(cluster)
    assert typed.of(spec, groups, 4) == ([[0], [2, 3]], 4)
    assert typed.of(job("Y"), groups, 4) == (groups, 4)
    only_b = job("Z", gpu_types=frozenset({"B"}))
    assert typed.of(only_b, groups, 4) == ([[1]], 2)
    assert whole_gpu_spec(job("F", gpu_milli=300)).gpu_milli == 0
