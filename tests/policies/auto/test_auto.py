"""The ``auto`` meta-policy switches combinations when the workload calls for it."""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from shapeshift.policies.framework.composed import ORDERINGS
from shapeshift.policies.framework.registry import make_policy
from tests.conftest import jcts, job, run


class ShortestFirst:
    """Test ordering: shortest expected duration first (non-preemptive)."""

    name = "test-shortest"
    preemptive = False

    def order(self, view, partition: str, jobs: Iterable[str]) -> Iterable[str]:
        return sorted(jobs, key=lambda j: (view.expected_duration(j), j))


@pytest.fixture
def shortest(monkeypatch):
    monkeypatch.setitem(ORDERINGS, ShortestFirst.name, ShortestFirst)
    return ShortestFirst.name


def bursty_trace():
    """Two bursts on one 4-GPU node, each won by a different ordering. ``auto`` decides
    only at its 60 s rounds (as Blox's loop), so a job starts at the first round after the
    GPUs free up; both bursts arrive on round boundaries.

    Burst 1 (t=0): a 1000 s job, then three 10 s jobs, all 4 GPUs. Shortest-first runs
    a1 0-10, a2 60-70, a3 120-130, a0 180-1180 (JCTs 10, 70, 130, 1180); FIFO would make
    the three short jobs wait for a0. Shortest-first wins.
    Burst 2 (t=19980): three 1-GPU 60 s jobs, then a 4-GPU 50 s job. FIFO starts the
    three narrow jobs and the wide one waits for the round at 20040: 60, 60, 60, 110.
    Shortest-first would start the wide one first and delay all three narrow ones. FIFO
    wins.
    """
    burst1 = [job("a0", 0, 4, 1000), *(job(f"a{i}", 0, 4, 10) for i in (1, 2, 3))]
    burst2 = [*(job(f"b{i}", 19980, 1, 60) for i in (1, 2, 3)), job("b4", 19980, 4, 50)]
    return burst1 + burst2


def test_auto_switches_on_a_bursty_trace(shortest):
    policy = make_policy("auto", {"orderings": f"fifo,{shortest}", "admissions": "accept-all", "round": 60, "k": 1})
    result = run(bursty_trace(), "1x4", policy)
    chosen = [(e.time, e.chosen.ordering) for e in policy.timeline if e.switched]
    assert chosen == [(0.0, shortest), (19980.0, "fifo")]
    assert policy.switches == 2
    jct = jcts(result)
    assert [jct[f"a{i}"] for i in range(4)] == [1180, 10, 70, 130]
    assert [jct[j] for j in ("b1", "b2", "b3", "b4")] == [60, 60, 60, 110]
    # (1180 + 10 + 70 + 130 + 60 + 60 + 60 + 110) / 8 = 210; event-driven FIFO: 543.75.
    assert sum(jct.values()) / len(jct) == pytest.approx(210.0)
    fixed_fifo = jcts(run(bursty_trace(), "1x4", "fifo"))
    assert sum(fixed_fifo.values()) / 8 == pytest.approx(543.75)


def test_auto_keeps_the_incumbent_on_ties(shortest):
    policy = make_policy("auto", {"orderings": f"fifo,{shortest}", "admissions": "accept-all", "round": 60, "k": 1})
    # one job at a time: every ordering gives the same schedule, so no switch ever happens
    run([job("x", 0, 4, 100), job("y", 500, 4, 100)], "1x4", policy)
    assert policy.timeline == [] or policy.switches == 0


def test_auto_scores_candidates_in_parallel_processes(shortest):
    policy = make_policy(
        "auto", {"orderings": f"fifo,{shortest}", "admissions": "accept-all", "round": 60, "k": 1, "workers": 2}
    )
    run(bursty_trace(), "1x4", policy)
    assert [e.chosen.ordering for e in policy.timeline if e.switched] == [shortest, "fifo"]


def test_auto_is_deterministic(shortest):
    def timeline():
        policy = make_policy(
            "auto", {"orderings": f"fifo,{shortest}", "admissions": "accept-all", "round": 60, "k": 1, "seed": 3}
        )
        run(bursty_trace(), "1x4", policy)
        return policy.timeline

    assert timeline() == timeline()


def test_auto_rejects_unknown_orderings():
    from shapeshift.errors import InputError

    with pytest.raises(InputError, match=r"unknown ordering 'nope'; known: .*fifo"):
        make_policy("auto", {"orderings": "fifo,nope"})


def test_runner_writes_the_timeline_and_the_report_shows_it(shortest, tmp_path):
    from shapeshift.experiments.report import build_report
    from shapeshift.experiments.runner import run_experiment
    from shapeshift.experiments.schema import load_experiment
    from shapeshift.workloads.workload import Workload
    from tests.experiments.conftest import write

    Workload.from_jobs("bursty", bursty_trace()).write(tmp_path / "bursty.csv")
    path = write(
        tmp_path,
        f"""
        workloads: [{{file: bursty.csv}}]
        clusters: [1x4]
        policies:
          - {{policy: auto, params: {{orderings: [fifo, {shortest}], admissions: [accept-all], round: 60, k: 1}}}}
        """,
    )
    out = tmp_path / "out"
    run_experiment(load_experiment(path), out)
    (run,) = [p for p in (out / "runs").iterdir()]
    timeline = (run / "auto_timeline.csv").read_text().splitlines()
    assert timeline[0] == "time,ordering,admission,score,switched,candidates"
    switched = [line.split(",")[:2] for line in timeline[1:] if line.split(",")[4] == "1"]
    assert switched == [["0.0", shortest], ["19980.0", "fifo"]]
    row = __import__("pandas").read_csv(out / "results.csv").iloc[0]
    assert row["auto_switches"] == 2 and row["avg_jct"] == pytest.approx(210.0)
    report = build_report(out, tmp_path / "report.html")
    assert any(p.name.startswith("auto-timeline-") and p.stat().st_size > 5000 for p in report.figures)


def test_auto_candidates_skip_a_waiting_job_with_no_work_left():
    """Found by the invariant test: on 1x1, j0 (0 s) and j1 (1 s) arrive at t=0. At the first
    round both wait and both are admitted; the snapshot for the candidate simulations leaves
    out j0 (no work left) but the candidates were told to adopt it as admitted, and looked it
    up in a simulation that never saw it (KeyError). Expected: the candidates adopt only the
    jobs they simulate. Every candidate ordering (FIFO, SRTF, LAS; ties by submission, then
    id) puts j0 first: it takes the GPU at 0 and ends at 0, and j1 waits for the next 300 s
    round (Blox's rule: decisions only at rounds) and runs 300-301, JCT 301."""
    result = run([job("j0", 0, 1, 0.0), job("j1", 0, 1, 1.0)], "1x1", "auto")
    assert jcts(result) == {"j0": 0.0, "j1": 301.0}
def test_auto_handles_a_job_with_no_work_left_in_its_snapshot():
    # Found by the invariant test: a zero-duration job started at 0 is in the live run's
    # started set but not among the snapshot's jobs (nothing left to run); candidate
    # simulations must not look it up. Decisions come only at 300 s rounds (Blox): at 0,
    # j0 takes the one GPU and ends at once; a starts at the next round, 300, ends at 400.
    result = run([job("j0", 0, 1, 0.0), job("a", 0, 1, 100)], "1x1", "auto")
    assert jcts(result) == {"j0": 0, "a": 400}


def test_auto_without_a_simulation_says_so():
    # auto scores candidates by simulating; the simulator hands itself only to the policy it
    # runs, so behind a wrapper that hides ``use_replay`` auto has none at its first
    # evaluation (t=0: two jobs wait, two candidates) and must say what it lacks.
    from shapeshift.engine.contract import PolicyError

    inner = make_policy("auto", {"orderings": "fifo,srtf", "admissions": "accept-all", "round": 60, "k": 1})

    class Hiding:
        name, triggers, default_round = inner.name, inner.triggers, inner.default_round

        def decide(self, view):
            return inner.decide(view)

    with pytest.raises(PolicyError, match="auto simulates alternatives but was given no simulation"):
        run([job("x", 0, 4, 100), job("y", 0, 4, 10)], "1x4", Hiding())
