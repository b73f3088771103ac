"""The slurm policy: priority factors, usage decay, fair share, main scheduler, backfill.

Every expectation is derived by hand from Slurm's rules (priority_multifactor.c,
fair_tree.c, backfill.c, job_scheduler.c), in the comment beside it.
"""

from __future__ import annotations

import numpy as np
import pytest

from shapeshift.cluster import load_cluster
from shapeshift.errors import InputError
from shapeshift.policies.slurm.fairshare import FairShare
from shapeshift.policies.slurm.plan import Candidate, Ending, Free, Need, backfill
from shapeshift.policies.slurm.priority import JobFacts, Multifactor
from shapeshift.slurm.assoc import Assoc
from shapeshift.slurm.conf import PriorityConf
from tests.conftest import by_id, job, run


def _tree():
    return {
        "root": Assoc("root", "", "", 1),
        "A": Assoc("A", "", "root", 1),
        "B": Assoc("B", "", "root", 1),
        "A/a": Assoc("A", "a", "A", 1),
        "B/b": Assoc("B", "b", "B", 1),
    }


def test_priority_factors_by_hand():
    conf = PriorityConf(
        multifactor=True,
        weight_age=1000,
        weight_fairshare=0,
        weight_jobsize=100,
        weight_partition=50,
        weight_qos=10,
        max_age=1000,
    )
    mf = Multifactor(conf, cluster_cpus=64, node_count=4)
    facts = JobFacts(eligible=100, cpus=16, min_nodes=1, assoc="A/a", part_factor=0.5, qos_factor=1.0)
    f = mf.factors(facts, now=350, fairshare=0.3)
    # age: (350-100)/1000 = 0.25; size (favour large): (1/4 + 16/64)/2 = 0.25.
    assert (f.age, f.jobsize, f.partition, f.qos) == (0.25, 0.25, 0.5, 1.0)
    # 1000*0.25 + 100*0.25 + 50*0.5 + 10*1 = 250 + 25 + 25 + 10 = 310.
    assert mf.priority(facts, 350, 0.3) == 310
    # Age saturates at PriorityMaxAge: factor 1.
    assert mf.factors(facts, now=5000, fairshare=0).age == 1.0
    small = Multifactor(PriorityConf(multifactor=True, weight_jobsize=100, favor_small=True), 64, 4)
    # favour small: ((4-1)/4 + (64-16)/64)/2 = (0.75 + 0.75)/2 = 0.75 -> 75.
    assert small.priority(facts, 0, 0) == 75
    # A job with every weight 0 still gets priority 1 (0 means held).
    assert Multifactor(PriorityConf(multifactor=True), 64, 4).priority(facts, 0, 0) == 1


def test_priorities_over_arrays_match_each_job_by_hand_and_one_by_one():
    conf = PriorityConf(
        multifactor=True, weight_age=1000, weight_fairshare=2000, weight_jobsize=100, weight_partition=50,
        weight_qos=10, max_age=1000,
    )
    mf = Multifactor(conf, cluster_cpus=64, node_count=4)
    jobs = [
        JobFacts(eligible=100.7, cpus=16, min_nodes=1, assoc="A/a", part_factor=0.5, qos_factor=1.0),
        JobFacts(eligible=0, cpus=64, min_nodes=4, assoc="B/b", part_factor=0.0, qos_factor=0.0, nice=500),
        JobFacts(eligible=349, cpus=1, min_nodes=1, assoc="A/a", part_factor=1.0, qos_factor=0.25),
    ]
    fairshare = np.array([0.3, 0.0, 0.3])
    got = mf.priorities(np.array([mf.static(j) for j in jobs]), 350.9, fairshare).tolist()
    # Whole seconds: age (350 - 100) / 1000 = 0.25 -> 250 + 600 + 25 + 25 + 10 = 910.
    # Second job: age 350/1000 -> 350; size (4/4 + 64/64)/2 = 1 -> 100; nice 500 ->
    # 350 + 100 - 500 = -50, so 1 (0 would mean held).
    # Third: age 1/1000 -> 1; fair share 600; size (1/4 + 1/64)/2 = 0.1328125 -> 13.28;
    # partition 50; QOS 2.5: 666.78 -> 666.
    assert got == [910, 1, 666]
    assert got == [mf.priority(j, 350.9, f) for j, f in zip(jobs, fairshare.tolist(), strict=True)]


def test_usage_decays_by_half_over_the_half_life():
    fs = FairShare(_tree(), half_life=1000)
    fs.add_usage("A/a", 100.0)
    assert (fs.usage["A/a"], fs.usage["A"], fs.usage["root"]) == (100.0, 100.0, 100.0)
    fs.decay_all(1000)
    # (1 - 0.693/1000)^1000 = exp(1000 ln(0.999307)) = 0.49995.
    assert fs.usage["A/a"] == pytest.approx(49.995, abs=0.01)
    # A 60 s tick charges a job of 4 billable TRES 60 * d^60 * 4, d = 1 - 0.693/1000.
    before = fs.usage["B/b"]
    fs.charge_tick(60, [("B/b", 4.0)])
    assert fs.usage["B/b"] - before * (1 - 0.000693) ** 60 == pytest.approx(60 * (1 - 0.000693) ** 60 * 4)


def test_classic_fair_share_by_hand():
    fs = FairShare(_tree(), half_life=0, fair_tree=False)
    fs.add_usage("A/a", 10.0)
    fs.recompute()
    # A's user: UA = 1, UE(A) = 1 + (1 - 1)*0.5 = 1, S_norm = 0.5 -> 2^-(1/0.5) = 0.25.
    # B's user: UA = 0, UE(B) = 0 + (1 - 0)*0.5 = 0.5, UE(b) = 0 + 0.5*1 = 0.5 -> 2^-(0.5/0.5) = 0.5.
    assert fs.factor("A/a") == pytest.approx(0.25) and fs.factor("B/b") == pytest.approx(0.5)


def test_fair_tree_ranks_by_hand():
    fs = FairShare(_tree(), half_life=0)
    # No usage: every level_fs is infinite, all tied: both users rank 2/2 = 1.
    assert fs.factor("A/a") == fs.factor("B/b") == 1.0
    fs.add_usage("A/a", 10.0)
    fs.recompute()
    # level_fs(A) = 0.5 / 1 = 0.5, level_fs(B) = 0.5 / 0 = inf: B's user ranks first (2/2),
    # A's second (1/2).
    assert (fs.factor("B/b"), fs.factor("A/a")) == (1.0, 0.5)


def _deeper_tree(usage):
    tree = {
        "root": Assoc("root", "", "", 1),
        "A": Assoc("A", "", "root", 2),
        "B": Assoc("B", "", "root", 1),
        "A/a1": Assoc("A", "a1", "A", 1),
        "A/a2": Assoc("A", "a2", "A", 3),
        "B/b1": Assoc("B", "b1", "B", 1),
        "B/b2": Assoc("B", "b2", "B", 1),
    }
    fs = FairShare(tree, half_life=0)
    for key, amount in usage.items():
        fs.add_usage(key, amount)
    fs.recompute()
    return fs


def test_fair_tree_ranks_users_within_their_accounts():
    fs = _deeper_tree({"A/a1": 30.0, "A/a2": 10.0, "B/b1": 20.0, "B/b2": 40.0})
    # Usage A = 40, B = 60, root = 100. level_fs(A) = (2/3) / 0.4 = 1.67 > level_fs(B) =
    # (1/3) / 0.6 = 0.56: A's users first. In A: a2 = 0.75 / (10/40) = 3 before a1 = 0.25 /
    # (30/40) = 0.33; in B: b1 = 0.5 / (20/60) = 1.5 before b2 = 0.5 / (40/60) = 0.75. Visit
    # order a2, a1, b1, b2 (not the order of their own level_fs: a2, b1, b2, a1): ranks
    # 4/4, 3/4, 2/4, 1/4.
    got = [fs.factor(k) for k in ("A/a2", "A/a1", "B/b1", "B/b2")]
    assert got == [1.0, 0.75, 0.5, 0.25]


def test_fair_tree_tied_users_share_a_rank():
    fs = _deeper_tree({"A/a1": 30.0, "A/a2": 10.0, "B/b1": 30.0, "B/b2": 30.0})
    # As above for A (a2 4/4, a1 3/4); in B, b1 and b2 both 0.5 / (30/60) = 1: tied, the
    # second keeps the first's rank: b1 = b2 = 2/4.
    got = [fs.factor(k) for k in ("A/a2", "A/a1", "B/b1", "B/b2")]
    assert got == [1.0, 0.75, 0.5, 0.5]


def _running_half():
    # One node with 4 GPUs; a running job holds 2 of them until its limit ends at t=100.
    return Free([2], [100.0], [100.0]), [Ending(100.0, ((0, Need(2, 0, 0)),))]


def test_backfill_starts_a_job_that_ends_before_the_reservation():
    free, running = _running_half()
    queue = [
        Candidate("big", Need(4, 0, 0), 600, [[0]], 4),  # needs the whole node: reserved from t=100
        Candidate("short", Need(2, 0, 0), 60, [[0]], 4),  # 0..60 ends before 100: backfilled
    ]
    result = backfill(0, queue, free, running, window=86400, resolution=1, max_job_test=500)
    assert [j for j, _ in result.started] == ["short"]
    assert [(r.job_id, r.begin, r.end) for r in result.reservations] == [("big", 100, 700)]


def test_backfill_does_not_start_a_job_that_would_delay_the_reservation():
    free, running = _running_half()
    queue = [Candidate("big", Need(4, 0, 0), 600, [[0]], 4), Candidate("long", Need(2, 0, 0), 120, [[0]], 4)]
    result = backfill(0, queue, free, running, window=86400, resolution=1, max_job_test=500)
    # 0..120 overlaps big's reservation from 100: not started; it is planned after big (700).
    assert result.started == []
    assert [(r.job_id, r.begin) for r in result.reservations] == [("big", 100), ("long", 700)]


def test_backfill_resolution_rounds_the_reservation_start_down():
    free, running = _running_half()
    queue = [Candidate("big", Need(4, 0, 0), 600, [[0]], 4), Candidate("short", Need(2, 0, 0), 60, [[0]], 4)]
    # bf_resolution=60: big's slot starts at floor(100/60)*60 = 60, so short (0..60) touches it.
    result = backfill(0, queue, free, running, window=86400, resolution=60, max_job_test=500)
    assert result.started == [] and result.reservations[0].begin == 60


def test_backfill_window_and_job_test_limits():
    free, running = _running_half()
    queue = [Candidate("big", Need(4, 0, 0), 600, [[0]], 4), Candidate("short", Need(2, 0, 0), 60, [[0]], 4)]
    # A 50 s window ends before t=100: big gets no reservation, so short starts.
    result = backfill(0, queue, free.copy(), running, window=50, resolution=1, max_job_test=500)
    assert result.reservations == [] and [j for j, _ in result.started] == ["short"]
    # bf_max_job_test=1: only big is tested.
    result = backfill(0, queue, free.copy(), running, window=86400, resolution=1, max_job_test=1)
    assert result.started == [] and result.tested == 1


def _conf(tmp_path, scheduler="sched/backfill", extra=""):
    path = tmp_path / "slurm.conf"
    path.write_text(
        "NodeName=n1 CPUs=8 RealMemory=1000 Gres=gpu:4\n"
        "PartitionName=p Nodes=n1 Default=YES\n"
        f"SchedulerType={scheduler}\n"
        "SchedulerParameters=bf_interval=1,bf_resolution=1,sched_interval=1\n" + extra
    )
    return load_cluster(path)


def test_simulated_backfill_and_main_scheduler(tmp_path):
    # r: 2 GPUs 0..50 (limit 100 s -> planned end 100); big: 4 GPUs at 1 (limit 10 min);
    # s: 2 GPUs at 2, runs 30 s, limit 1 min -> 2..62 ends before 100: backfilled at 2.
    # Limits are whole minutes: 100 s is planned as 120 s, so big's slot begins at 120.
    jobs = [
        job("r", 0, 2, 50, user="u", tenant="A", vc="p", time_limit=100),
        job("big", 1, 4, 10, user="u", tenant="A", vc="p", time_limit=600),
        job("s", 2, 2, 30, user="u", tenant="A", vc="p", time_limit=60),
    ]
    result = by_id(run(jobs, _conf(tmp_path), "slurm"))
    assert result["s"].first_start == 2 and result["big"].first_start == 50
    # sched/builtin: no backfill; the main scheduler stops at big, so s waits for it (60).
    result = by_id(run(jobs, _conf(tmp_path, "sched/builtin"), "slurm"))
    assert result["s"].first_start == 60 and result["big"].first_start == 50


def test_partition_preemption_without_shared_nodes_preempts_nothing(tmp_path):
    # preempt.html: with preempt/partition_prio a job of a higher-PriorityTier partition
    # preempts jobs of lower-tier partitions on the nodes both partitions hold. Here "hi"
    # (tier 2, node n2) and "lo" (tier 1, node n1) share no node: lo's job keeps n1 for
    # its whole run (0..50) and hi's jobs only queue on n2 (h1 0..30, h2 30..60).
    path = tmp_path / "slurm.conf"
    path.write_text(
        "NodeName=n[1-2] CPUs=8 RealMemory=1000 Gres=gpu:4\n"
        "PartitionName=lo Nodes=n1 PriorityTier=1 Default=YES\nPartitionName=hi Nodes=n2 PriorityTier=2\n"
        "PreemptType=preempt/partition_prio\nPreemptMode=REQUEUE\nSchedulerType=sched/backfill\n"
        "SchedulerParameters=bf_interval=1,bf_resolution=1,sched_interval=1\n"
    )
    jobs = [
        job("l", 0, 4, 50, vc="lo", time_limit=60),
        job("h1", 1, 4, 30, vc="hi", time_limit=60),
        job("h2", 2, 4, 30, vc="hi", time_limit=60),
    ]
    result = by_id(run(jobs, load_cluster(path), "slurm"))
    assert [result[j].first_start for j in ("l", "h1", "h2")] == [0, 1, 31]
    assert result["l"].end_time == 50 and result["l"].preemptions == 0


def test_node_choice_is_cons_tres_best_fit():
    from shapeshift.policies.slurm.plan import fit

    # Four nodes with 4 GPUs, 8 CPUs. n0 is full; n1 has 7 free CPUs, n2 6, n3 8.
    free = Free([0, 2, 2, 4], [7.0, 7.0, 6.0, 8.0], [100.0] * 4)
    # Usable nodes n1-n3 form one run; a one-node job takes the fewest free CPUs: n2.
    assert fit(Need(1, 1, 0), [[0, 1, 2, 3]], free, 4) == [(2, Need(1, 1, 0))]
    # 3 GPUs: only n3 is usable.
    assert fit(Need(3, 1, 0), [[0, 1, 2, 3]], free, 4) == [(3, Need(3, 1, 0))]
    # Runs {n0} (8 free CPUs) and {n2, n3} (14): the run with fewer free CPUs wins: n0.
    # A lighter Weight group is tried first: [3] alone fits, so n3.
    free = Free([4, 0, 4, 4], [8.0, 0.0, 6.0, 8.0], [100.0] * 4)
    assert fit(Need(1, 1, 0), [[0, 1, 2, 3]], free, 4) == [(0, Need(1, 1, 0))]
    assert fit(Need(1, 1, 0), [[3], [0, 1, 2]], free, 4) == [(3, Need(1, 1, 0))]
    # 8 GPUs on 4-GPU nodes: two nodes of 4 from the best run with two usable nodes (n2, n3).
    assert fit(Need(8, 2, 0), [[0, 1, 2, 3]], free, 4) == [(2, Need(4, 1, 0)), (3, Need(4, 1, 0))]


def test_will_run_takes_running_jobs_off_in_windows():
    # Two 4-GPU nodes (8 CPUs each). Running, with planned ends (start + limit): a, 2 GPUs
    # on n1 until 40; b, 1 GPU on n0 until 62; c, 2 GPUs on n1 until 78. Free now: n0 3
    # GPUs, n1 none. _will_run_test (cons_common/job_test.c, 22.05): the first window ends
    # at 40 rounded up to the next multiple of 30 (60); the batch holds every end <= 60 + 30,
    # i.e. a, b and c; after it both nodes are empty, the job starts at the batch's last end
    # (78) and best fit takes n0 (equal free CPUs: the first). So H's slot is n0 from 78,
    # and L (1 GPU, 0..70 on n0) ends before it: backfilled now. Taking jobs off one at a
    # time would have put H on n0 at 62 and kept L waiting.
    free = Free([3, 0], [7.0, 4.0], [0.0, 0.0])
    running = [
        Ending(40, ((1, Need(2, 2, 0)),)),
        Ending(62, ((0, Need(1, 1, 0)),)),
        Ending(78, ((1, Need(2, 2, 0)),)),
    ]
    queue = [
        Candidate("H", Need(4, 1, 0), 60, [[0, 1]], 4),
        Candidate("L", Need(1, 1, 0), 70, [[0, 1]], 4),
    ]
    result = backfill(0, queue, free, running, window=86400, resolution=1, max_job_test=500)
    assert [(r.job_id, sorted(r.nodes), r.begin, r.end) for r in result.reservations] == [("H", [0], 78, 138)]
    assert [(j, [n for n, _ in p]) for j, p in result.started] == [("L", [0])]
    # The windows are aligned on the wall clock: with time 0 at 25 s past a multiple of
    # 30, a's end (40) is at 65 = 60 + 5 on that clock, so the first window ends at 40 + 25
    # = 65 and the batch holds ends <= 95: still all three. H at 78 again.
    result = backfill(0, queue, Free([3, 0], [7.0, 4.0], [0.0, 0.0]), running, window=86400, resolution=1,
                      max_job_test=500, epoch=25.0)  # fmt: skip
    assert [(r.job_id, r.begin) for r in result.reservations] == [("H", 78)]


def test_priority_calculation_runs_when_a_job_ends_at_the_same_instant(tmp_path):
    # One node, 1 GPU; fair share only (PriorityWeightFairshare=10000, no age), calc
    # period 1 min (ticks at 0, 60, ...). x (alice, account A) runs 0..60; y (alice) is
    # submitted at 10 and z (bob, account B) at 20, both waiting for the GPU. At 60 x ends
    # and the calculation due at 60 charges alice 60 s: bob's usage is 0, so Fair Tree
    # ranks bob first (factor 1 against 1/2) and z starts at 60, y after it (60 + 30).
    # (Skipping the calculation because a job ended at 60 left both at their equal
    # submission priorities, and y, submitted first, started at 60.)
    path = tmp_path / "slurm.conf"
    path.write_text(
        "NodeName=n1 CPUs=8 RealMemory=1000 Gres=gpu:1\nPartitionName=p Nodes=n1 Default=YES\n"
        "PriorityType=priority/multifactor\nPriorityWeightFairshare=10000\nPriorityWeightAge=0\n"
        "PriorityCalcPeriod=1\nSchedulerType=sched/backfill\n"
        "SchedulerParameters=bf_interval=1,bf_resolution=1,sched_interval=1\n"
    )
    jobs = [
        job("x", 0, 1, 60, user="alice", tenant="A", vc="p", time_limit=120),
        job("y", 10, 1, 30, user="alice", tenant="A", vc="p", time_limit=120),
        job("z", 20, 1, 30, user="bob", tenant="B", vc="p", time_limit=120),
    ]
    result = by_id(run(jobs, load_cluster(path), "slurm"))
    assert result["z"].first_start == 60 and result["y"].first_start == 90


QOS_DUMP = """\
Name|Priority|GraceTime|Preempt|PreemptExemptTime|PreemptMode|Flags|UsageThres|UsageFactor|MaxTRESPU
normal|0|00:00:00|||cluster|||1.000000|
high|100|00:00:00|normal||cluster|||1.000000|gres/gpu=8
"""


def test_qos_dump_gives_the_qos_factor(tmp_path):
    from shapeshift.slurm.qos import read_qos

    (tmp_path / "qos.txt").write_text(QOS_DUMP)
    table = read_qos(tmp_path / "qos.txt")
    assert [(q.name, q.priority, q.preempt) for q in table] == [("normal", 0, ()), ("high", 100, ("normal",))]
    # One 4-GPU node, PriorityWeightQOS=1000, no other factor. a (normal) holds the node
    # 0..10; p (QOS normal) is submitted at 1, h (QOS high) at 2. QOS factor = priority /
    # largest priority: p 0/100 -> 0, h 100/100 -> 1000. So h starts first, at 10, and p
    # after it (10 + 20); with the QOS table left out both are 0 and p (older) goes first.
    path = tmp_path / "slurm.conf"
    path.write_text(
        "NodeName=n1 CPUs=8 RealMemory=1000 Gres=gpu:4\nPartitionName=p Nodes=n1 Default=YES\n"
        "PriorityType=priority/multifactor\nPriorityWeightQOS=1000\nPriorityWeightAge=0\n"
        "PriorityWeightFairshare=0\nSchedulerType=sched/builtin\n"
    )
    jobs = [
        job("a", 0, 4, 10, vc="p", qos="normal", time_limit=60),
        job("p", 1, 4, 20, vc="p", qos="normal", time_limit=60),
        job("h", 2, 4, 20, vc="p", qos="high", time_limit=60),
    ]
    result = by_id(run(jobs, load_cluster(path), "slurm", {"qos": str(tmp_path / "qos.txt")}))
    assert result["h"].first_start == 10 and result["p"].first_start == 30
    result = by_id(run(jobs, load_cluster(path), "slurm"))
    assert result["p"].first_start == 10 and result["h"].first_start == 30


def test_qos_dump_bad_priority_names_line_and_field(tmp_path):
    from shapeshift.slurm.qos import read_qos

    (tmp_path / "qos.txt").write_text("Name|Priority\nnormal|high\n")
    with pytest.raises(InputError) as err:
        read_qos(tmp_path / "qos.txt")
    assert err.value.line == 2 and err.value.field == "Priority"


def test_a_job_no_equal_split_can_hold_is_refused_not_left_blocking_its_partition():
    # 2 nodes x 2 GPUs. A 3-GPU job spans ceil(3/2) = 2 nodes, but 3 GPUs do not divide
    # over 2, so the per-node share falls to 1 GPU on 3 nodes: more nodes than the
    # partition has. slurmctld refuses it at submission (ESLURM_REQUESTED_NODE_CONFIG_
    # UNAVAILABLE); before, the replay left it at the head of the queue for ever, and the
    # 1-GPU job behind it never started (the invariant test's Hypothesis case).
    jobs = [job("three", 0, 3, 10), job("one", 0, 1, 10)]
    result = run(jobs, "2x2", "slurm")
    by = by_id(result)
    assert by["three"].state.name == "REJECTED"
    assert "Requested node configuration is not available" in by["three"].reject_reason
    assert by["one"].first_start == 0 and by["one"].state.name == "COMPLETED"
    # 4 GPUs split 2 + 2 over the two nodes, so the same cluster holds them.
    assert by_id(run([job("four", 0, 4, 10)], "2x2", "slurm"))["four"].state.name == "COMPLETED"


def test_running_jobs_are_charged_for_their_part_of_each_period():
    from shapeshift.policies.slurm.fairshare import Running

    # No decay (half-life 0): each job is charged seconds run in the period x billable
    # TRES (_decay_thread: elapsed * decay^elapsed * billable, decay = 1).
    fs = FairShare(_tree(), half_life=0)
    running = Running()
    running.add("x", 30.0, fs.index["A/a"], 2.0)  # starts at 30
    running.add("y", 0.0, fs.index["B/b"], 4.0)  # starts at 0, ends at 45
    running.finish("y", 45.0)
    running.charge(fs, 0.0, 60.0)
    # x: (60 - 30) * 2 = 60; y: (45 - 0) * 4 = 180; each account as its user, root both.
    assert (fs.usage["A/a"], fs.usage["A"], fs.usage["B/b"], fs.usage["root"]) == (60.0, 60.0, 180.0, 240.0)
    running.charge(fs, 60.0, 120.0)
    # y ended before 60 and is no longer charged; x adds 60 * 2 = 120.
    assert (fs.usage["A/a"], fs.usage["B/b"], fs.usage["root"]) == (180.0, 180.0, 360.0)
    assert "y" not in running.slot


def test_fit_finds_nodes_exactly_when_enough_nodes_meet_its_thresholds():
    import numpy as np

    from shapeshift.policies.slurm.fit import fit_thresholds
    from shapeshift.policies.slurm.plan import fit

    # By hand: 8 GPUs on 4-GPU nodes span two nodes of 4 (node_span); n0 and n2 have 4
    # free GPUs, n1 and n3 fewer: two nodes meet the share, so fit finds two (n0, n2,
    # across runs), and with n2 excluded only one meets it and fit finds none.
    free = Free([4, 3, 4, 2], [8.0] * 4, [10.0] * 4)
    need = Need(8, 2, 0)
    span, (gpus, cpus, mem) = fit_thresholds(need, 4)
    assert span == 2 and int(gpus) == 4
    assert fit(need, [[0, 1, 2, 3]], free, 4) == [(0, Need(4, 1, 0)), (2, Need(4, 1, 0))]
    assert fit(need, [[0, 1, 2, 3]], free, 4, {2}) is None
    # The rule the will-run test counts by, on random nodes, groups and exclusions: fit
    # returns nodes if and only if at least `span` allowed, non-excluded nodes meet all
    # three thresholds (CPUs and memory within fit's 1e-9 tolerance).
    rng = np.random.default_rng(7)
    for _ in range(3000):
        size = int(rng.integers(1, 12))
        nodes = list(range(size))
        rng.shuffle(nodes)
        cut = int(rng.integers(0, size + 1))
        groups = [sorted(nodes[:cut]), sorted(nodes[cut:])] if 0 < cut < size else [sorted(nodes)]
        free = Free(
            rng.integers(0, 5, size), rng.integers(0, 9, size) / rng.choice([1, 3, 10]), rng.integers(0, 5, size) * 0.1
        )
        need = Need(int(rng.integers(1, 13)), float(rng.integers(1, 9)) / 3, float(rng.integers(0, 3)) * 0.1)
        excluded = {int(n) for n in rng.choice(size, int(rng.integers(0, size + 1)), replace=False)}
        span, (gpus, cpus, mem) = fit_thresholds(need, 4)
        meets = sum(
            1
            for n in range(size)
            if n not in excluded and free.gpus[n] >= gpus and free.cpus[n] >= cpus and free.mem[n] >= mem
        )
        assert (fit(need, groups, free, 4, excluded) is not None) == (meets >= span)


def test_later_start_is_the_first_reserved_node_to_come_free():
    from shapeshift.policies.slurm.plan import Reservation, Reservations

    # The node-space map of _attempt_backfill: A holds n1 over 100..200 and B holds n1
    # over 200..300 (B starts as A ends, so n1 does not come free at 200); C holds n2 over
    # 150..250. From 0 the first instant a reserved usable node comes free is 250 (n2);
    # for a job that may use only n1 it is 300; from 250 on, 300; from 300, none.
    plan = Reservations()
    for r in (Reservation("A", frozenset({1}), 100, 200), Reservation("B", frozenset({1}), 200, 300),
              Reservation("C", frozenset({2}), 150, 250)):  # fmt: skip
        plan.add(r)
    assert [r.job_id for r in plan.items] == ["A", "B", "C"]
    assert plan.later_start(0, {1, 2}) == 250
    assert plan.later_start(0, {1}) == 300
    assert plan.later_start(250, {1, 2}) == 300
    assert plan.later_start(300, {1, 2}) is None
