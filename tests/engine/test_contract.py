"""The declared contract: traits with safe defaults, wrappers that forward them, and
optional capabilities that are asked for only where declared."""

from __future__ import annotations

import dataclasses

import pytest

from shapeshift.cluster import shorthand_cluster
from shapeshift.engine.contract import (
    DEFAULT_TRAITS,
    AdaptsInterference,
    KeepsTimeline,
    Policy,
    PolicyTraits,
    Prepares,
    ReportsSummary,
    traits_of,
)
from shapeshift.model import Schedule
from shapeshift.policies.framework.base import PartTraits, part_traits
from shapeshift.policies.framework.composed import AcceptAll, ComposedPolicy, FifoOrdering
from shapeshift.policies.framework.placement import Consolidated
from shapeshift.runs import RunSpec
from shapeshift.runs.execute import _policy_extra
from shapeshift.runs.parallel import serial_reason
from shapeshift.runs.recording import IntervalRecorder
from shapeshift.workloads.workload import Workload
from tests.conftest import job, run


class Bare:
    """A policy that declares nothing beyond ``Policy``: first come, first served on one
    node, everything else left to the contract's defaults."""

    name = "bare"
    triggers = frozenset({"arrival", "completion"})
    default_round = None

    def decide(self, view):
        return Schedule(base=view.allocations, changes={})


class Tripwire(Bare):
    """``Bare``, noting every attribute anything looks for on it beyond what it has."""

    def __init__(self):
        self.looked_for: list[str] = []

    def __getattr__(self, name):
        self.__dict__.setdefault("looked_for", []).append(name)
        raise AttributeError(name)


#: What may be looked for on a policy: the declared traits and the members of the declared
#: capability protocols (``isinstance`` against a protocol asks for each of them).
DECLARED = frozenset({
    "traits", "summary_fields", "timeline", "switches", "write_timeline", "prepare", "adopt",
    "interference_model", "knowledge", "use_replay", "never_placeable",
})


def test_a_policy_declaring_nothing_gets_the_defaults():
    # The defaults are the safe readings: not split by partition, no lease.
    assert isinstance(Bare(), Policy)
    assert traits_of(Bare()) == DEFAULT_TRAITS == PolicyTraits(partition_local=False, lease=0.0)


def test_a_policy_that_forgets_one_trait_gets_that_traits_default():
    class Leased(Bare):
        traits = PolicyTraits(lease=60.0)

    assert traits_of(Leased()) == PolicyTraits(partition_local=False, lease=60.0)


def test_traits_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        DEFAULT_TRAITS.partition_local = True  # type: ignore[misc]


def test_a_part_declaring_nothing_gets_the_part_defaults():
    class Plain:
        name = "plain"

    assert part_traits(Plain()) == PartTraits(partition_local=False, admits_all=False, static_keys=False)
    assert part_traits(AcceptAll()) == PartTraits(partition_local=True, admits_all=True)


def test_a_composed_policy_is_partition_local_only_when_both_parts_say_so():
    fifo = ComposedPolicy("fifo", AcceptAll(), FifoOrdering(), Consolidated())
    assert traits_of(fifo) == PolicyTraits(partition_local=True, lease=0.0)

    class Global(AcceptAll):
        traits = PartTraits(admits_all=True)  # partition_local left out: False

    mixed = ComposedPolicy("mixed", Global(), FifoOrdering(), Consolidated())
    assert traits_of(mixed).partition_local is False


def test_a_wrapper_forwards_the_traits_of_what_it_wraps():
    fifo = ComposedPolicy("fifo", AcceptAll(), FifoOrdering(), Consolidated(), lease=30.0)
    recorder = IntervalRecorder(fifo)
    assert traits_of(recorder) == traits_of(fifo) == PolicyTraits(partition_local=False, lease=30.0)
    # The lease (30 s) with event triggers makes fifo not partition-local; without one it is.
    assert traits_of(IntervalRecorder(ComposedPolicy("f", AcceptAll(), FifoOrdering(), Consolidated()))) == (
        PolicyTraits(partition_local=True)
    )


def test_a_policy_without_a_capability_is_never_probed_for_it():
    # A whole run, its summary fields and the check for a split run look on the policy for
    # nothing but the declared traits and capabilities, and call none of them.
    policy = Tripwire()
    for capability in (ReportsSummary, KeepsTimeline, AdaptsInterference, Prepares):
        assert not isinstance(policy, capability)
    result = run([job("a", 0, 1, 10)], "1x1", policy)
    assert [j.state.name for j in result.jobs] == ["UNFINISHED"]  # it never starts anything
    spec = RunSpec(workload=Workload.of_jobs("w", [job("a", 0, 1, 10)]), cluster=shorthand_cluster(1, 1))
    assert _policy_extra(spec, policy) == {"seed": 0}
    assert serial_reason(spec, policy) == "the cluster has a single partition"
    assert policy.looked_for and set(policy.looked_for) <= DECLARED


def test_declared_capabilities_are_used():
    class Reporting(Bare):
        def summary_fields(self):
            return {"bare_rounds": 3}

    spec = RunSpec(workload=Workload.of_jobs("w", [job("a", 0, 1, 10)]), cluster=shorthand_cluster(1, 1))
    assert isinstance(Reporting(), ReportsSummary)
    assert _policy_extra(spec, Reporting()) == {"seed": 0, "bare_rounds": 3}


class PreemptsAt10(Bare):
    """Runs ``a`` (4 GPUs) from its arrival; at ``b``'s arrival (10) preempts ``a`` for
    ``b``; runs ``a`` again once ``b`` is done. Its preemption does ``kind`` to ``a``."""

    def __init__(self, kind):
        from shapeshift.engine.contract import PreemptKind

        self.kind = PreemptKind(kind)
        self.traits = PolicyTraits(preempts_as=lambda job_id: self.kind)

    def decide(self, view):
        from shapeshift.model import Allocation, Resources

        whole = Allocation(((0, Resources(4, 0, 0)),))
        pending = set(view.pending(""))
        if "b" in pending:
            changes = {"a": None, "b": whole} if "a" in view.allocations else {"b": whole}
        elif "a" in pending and not view.allocations:
            changes = {"a": whole}
        else:
            changes = {}
        return Schedule(base=view.allocations, changes=changes)


@pytest.mark.parametrize(
    ("kind", "a_end", "a_state"),
    [
        # keep: a ran 0..10, keeps its 10 s of work; b 10..30; a restores from its
        # checkpoint (the default 30 s pause, Overheads.restore) and runs its 90 s left:
        # 30 + 30 + 90 = 150.
        ("keep", 150, "completed"),
        # requeue: a's 10 s are lost and it has nothing to restore: after b (10..30) it
        # runs its whole 100 s, 30..130.
        ("requeue", 130, "completed"),
        # cancel: a ends at 10, cancelled; it never runs again.
        ("cancel", 10, "cancelled"),
    ],
)
def test_a_policy_declares_what_its_preemption_does(kind, a_end, a_state):
    jobs = [job("a", 0, 4, 100), job("b", 10, 4, 20)]
    result = {j.job_id: j for j in run(jobs, "1x4", PreemptsAt10(kind)).jobs}
    assert (result["a"].end_time, result["a"].state.value, result["a"].preemptions) == (a_end, a_state, 1)
    assert result["b"].end_time == 30
