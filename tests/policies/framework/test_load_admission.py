"""Load-based admission, and the generic preemption rule that avoids useless evictions."""

from __future__ import annotations

from shapeshift.engine.overheads import Overheads
from shapeshift.policies.framework.composed import ADMISSIONS, ComposedPolicy, FifoOrdering
from shapeshift.policies.framework.placement import Consolidated
from shapeshift.policies.framework.registry import make_policy
from tests.conftest import by_id, jcts, job, run


def _srtf_with(threshold: str):
    return make_policy("srtf", {"admission": "load-based", "load_threshold": threshold, "lease": "0"})


def test_load_based_admission_holds_a_job_until_capacity_frees():
    # Blox's rule: admit the next held job while the active demand is <= threshold x GPUs,
    # tested before adding it. 4 GPUs; a (4 GPUs, 100 s) is active from 0.
    # Threshold 0.5 (2 GPUs): demand 4 > 2, so b (1 GPU at 1) is held until a finishes and
    # SRTF cannot preempt a for it.
    held = run([job("a", 0, 4, 100), job("b", 1, 1, 10)], "1x4", _srtf_with("0.5"))
    assert by_id(held)["b"].first_start == 100 and by_id(held)["a"].preemptions == 0
    # Threshold 1.0 (4 GPUs): demand 4 <= 4, so b is admitted (demand may cross the
    # threshold by one job) and SRTF preempts a for it at once.
    admitted = run([job("a", 0, 4, 100), job("b", 1, 1, 10)], "1x4", _srtf_with("1.0"))
    assert by_id(admitted)["b"].first_start == 1 and by_id(admitted)["a"].preemptions == 1


def test_load_based_admission_lets_demand_cross_the_threshold_by_one_job():
    """Blox ``load_based_accept.py``: 1x4, a (3 GPUs, 1,000 s) at 0 and
    b (2 GPUs, 10 s) at 1. Demand before b is 3 <= 4 (1.0x) and <= 4.8 (1.2x): b is
    admitted at 1 in both cases; event-driven LAS then runs it at once (it has attained
    nothing), preempting a."""
    for threshold in ("1.0", "1.2"):
        policy = make_policy(
            "las", {"admission": "load-based", "load_threshold": threshold, "mode": "event", "lease": "0"}
        )
        result = run([job("a", 0, 3, 1000), job("b", 1, 2, 10)], "1x4", policy)
        assert by_id(result)["b"].first_start == 1, threshold


def test_load_based_demand_counts_jobs_it_did_not_admit_itself():
    """After ``auto`` switches from accept-all to load-based 1.2x, the
    running jobs still count as demand. 1x4; four 1-GPU 5,000 s jobs run from 0 (demand 4);
    eight 1-GPU 50 s jobs arrive at 100. Demand 4 <= 4.8 admits one (demand 5 > 4.8), so
    exactly one newcomer is admitted at 100, not all eight."""
    from shapeshift.engine.view import ClusterView
    from shapeshift.policies.auto.policy import hand_over
    from shapeshift.policies.framework.admission import LoadBasedAdmission
    from shapeshift.policies.framework.composed import AcceptAll
    from shapeshift.policies.size_based.las import LeastAttainedService

    class Switching:
        """Accept-all until 100, then a new load-based 1.2x policy, handed over as ``auto`` does."""

        name, triggers, default_round = "las-switch", frozenset({"arrival", "completion"}), None

        def __init__(self) -> None:
            self.before = ComposedPolicy("before", AcceptAll(), LeastAttainedService(), Consolidated())
            self.after = ComposedPolicy("after", LoadBasedAdmission(1.2), LeastAttainedService(), Consolidated())
            self.switched = False

        def decide(self, view: ClusterView):
            if view.now >= 100 and not self.switched:
                self.after.admission = hand_over(self.before.admission, self.after.admission, view)
                self.switched = True
            return (self.after if self.switched else self.before).decide(view)

    policy = Switching()
    trace = [job(f"long{i}", 0, 1, 5000) for i in range(4)] + [job(f"short{i}", 100, 1, 50) for i in range(8)]
    result = run(trace, "1x4", policy)
    started_at_100 = [j for j in result.jobs if j.job_id.startswith("short") and j.first_start == 100]
    assert len(started_at_100) == 1
    # The long jobs are preempted one at a time for the admitted newcomer, not all at once.
    assert sum(j.preemptions for j in result.jobs if j.job_id.startswith("long") and j.first_start == 0) >= 1


def test_load_based_admission_releases_held_jobs_first_come_first_served():
    # Threshold 1.0 on 2 GPUs with backfilling FIFO: a (2) admitted; b (2) and c (1) held.
    # When a ends, b is released first (FIFO), and c must wait for the threshold too.
    policy = ComposedPolicy(
        "fifo-admit", ADMISSIONS["load-based"](1.0), FifoOrdering(), Consolidated(), head_of_line_blocking=False
    )
    result = run([job("a", 0, 2, 100), job("b", 1, 2, 50), job("c", 2, 1, 10)], "1x2", policy)
    assert jcts(result) == {"a": 100, "b": 149, "c": 158}


def test_preemption_keeps_a_victim_whose_gpus_would_not_let_the_newcomer_start():
    # 2 nodes x 2 GPUs, SRTF, no restore penalty. y (500 s) and x (900 s) start on node 0,
    # w (800 s, from 1) on node 1. At 10, z (2 GPUs on one node, 10 s) ranks first; by GPU
    # count z, y and w fill the 4 GPUs and x is the victim, but evicting x frees one GPU on
    # node 0 next to y: z still cannot start. x keeps running; z starts when w ends (801).
    trace = [job("y", 0, 1, 500), job("x", 0, 1, 900), job("w", 1, 1, 800), job("z", 10, 2, 10)]
    result = run(trace, "2x2", "srtf", overheads=Overheads(0.0, 0.0))
    jobs = by_id(result)
    assert jobs["x"].preemptions == 0
    assert jobs["z"].first_start == 801

