"""CES inside the simulator: powered-down nodes take no jobs, boots take time, energy is counted."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from shapeshift.cli.main import app
from shapeshift.cluster import shorthand_cluster
from shapeshift.energy.ces import CESConfig
from shapeshift.energy.sim_component import CESPolicy, ces_config, ces_round, parse_energy_args
from shapeshift.engine.contract import traits_of
from shapeshift.errors import InputError
from shapeshift.model import Allocation, Resources, Schedule
from shapeshift.policies.framework.base import PolicyError
from shapeshift.policies.framework.registry import make_policy
from shapeshift.sim.simulator import simulate
from shapeshift.workloads.synthetic import PoissonSpec, poisson_workload
from tests.conftest import by_id, job

runner = CliRunner()


class Spy:
    """Inner policy that checks, at every decision, what CES promises."""

    def __init__(self, inner):
        self.inner = inner
        self.name = inner.name
        self.triggers = inner.triggers
        self.default_round = inner.default_round
        self.traits = traits_of(inner)
        self.ces: CESPolicy | None = None
        self.checks = 0

    def decide(self, view):
        assert self.ces is not None
        off = set(self.ces.off_nodes().tolist())
        hidden = set(self.ces.unusable_nodes().tolist())
        # Never fewer powered nodes than in use: no running job holds an off node.
        for alloc in view.allocations.values():
            assert not off & set(alloc.nodes)
        scratch = view.scratch()
        assert all(scratch.gpus[n] == 0 for n in hidden)
        for nodes in view.partitions.values():  # the per-partition counts see the hiding too
            assert scratch.free_gpus_in(nodes) == int(scratch.gpus[nodes].sum())
        schedule = self.inner.decide(view)
        for alloc in schedule.changes.values():
            if alloc is not None:
                assert not hidden & set(alloc.nodes), "a job landed on a powered-down or booting node"
        self.checks += 1
        return schedule


def wrapped(cluster, config, policy="fifo", args=None):
    spy = Spy(make_policy(policy, args or {}))
    ces = CESPolicy(spy, cluster, config)
    spy.ces = ces
    return spy, ces


@pytest.mark.parametrize("policy,args", [("fifo", {}), ("fifo", {"backfill": "true", "placement": "scattered"})])
def test_ces_never_powers_off_busy_nodes_and_jobs_avoid_off_nodes(policy, args):
    cluster = shorthand_cluster(6, 8)
    jobs = poisson_workload(PoissonSpec(jobs=200, seed=3), name="p").jobs()
    spy, ces = wrapped(cluster, CESConfig(buffer=1), policy, args)
    result = simulate(jobs, cluster, ces)
    assert spy.checks > 100 and ces.power_downs > 0 and ces.wakeups > 0
    assert all(j.state.value == "completed" for j in result.jobs)


@pytest.mark.parametrize("policy,args", [("tiresias", {}), ("qssf", {}), ("sjf", {"estimator": "rolling"})])
def test_with_nothing_powered_down_ces_changes_no_decision(policy, args):
    """A buffer as large as the cluster keeps every node on, so the inner policy must
    decide exactly as without CES. Bug: CES's view dropped the jobs finished since the
    last decision, so tiresias kept finished jobs in its queues (a KeyError on this trace)
    and history estimators (qssf's, rolling) never learned under CES."""
    cluster = shorthand_cluster(6, 8)
    jobs = poisson_workload(PoissonSpec(jobs=200, seed=3), name="p").jobs()
    ces = CESPolicy(make_policy(policy, args), cluster, CESConfig(buffer=6))
    with_ces = simulate(jobs, cluster, ces)
    without = simulate(jobs, cluster, make_policy(policy, args))
    assert ces.power_downs == 0
    ends = [sorted((j.job_id, j.first_start, j.end_time, j.preemptions) for j in r.jobs) for r in (with_ces, without)]
    assert ends[0] == ends[1]


def test_a_job_placed_on_a_powered_down_node_is_refused():
    cluster = shorthand_cluster(2, 8)

    class Rogue:
        name = "rogue"
        triggers = frozenset({"arrival"})
        default_round = None

        def decide(self, view):  # ignores the view and takes node 1, which CES powered down
            jid = next(iter(view.pending("")))
            alloc = Allocation(((1, Resources(8)),))
            return Schedule(base=view.allocations, changes={jid: alloc})

    ces = CESPolicy(Rogue(), cluster, CESConfig(buffer=0))
    with pytest.raises(PolicyError, match="powered-down"):
        simulate([job("a", 0, 8, 100)], cluster, ces)


def test_boot_delay_and_energy_by_hand():
    """2 nodes x 8 GPUs, buffer 0. t=0: A (8 GPUs) needs one node, node 1 is powered down.
    t=1200: B (16 GPUs) needs both: node 1 is woken and usable at 1500, so B waits exactly
    the boot delay. Node 1 was off from 0 to 1200: 1/3 node-hour."""
    cluster = shorthand_cluster(2, 8)
    ces = CESPolicy(make_policy("fifo"), cluster, CESConfig(buffer=0, boot_delay=300))
    result = simulate([job("a", 0, 8, 100), job("b", 1200, 16, 100)], cluster, ces)
    jobs = by_id(result)
    assert jobs["a"].first_start == 0 and jobs["a"].allocation is None
    assert jobs["b"].first_start == pytest.approx(1500) and jobs["b"].end_time == pytest.approx(1600)
    s = ces.summary(end_time=1600)
    assert s["energy_node_hours_saved"] == pytest.approx(1200 / 3600)
    # 800 W per idle node; facility energy = 3 x IT (cooling counts twice the servers).
    assert s["energy_kwh_saved"] == pytest.approx(1200 / 3600 * 0.8 * 3)
    assert s["energy_wakeups"] == 1 and s["energy_jobs_waited_for_boot"] == 1 and s["energy_power_downs"] == 1
    baseline = simulate([job("a", 0, 8, 100), job("b", 1200, 16, 100)], cluster, make_policy("fifo"))
    assert by_id(baseline)["b"].first_start == 1200


def test_round_length_sees_bins_and_boots():
    assert ces_round(CESConfig()) == 300
    assert ces_round(CESConfig(boot_delay=0)) == 600
    assert ces_round(CESConfig(boot_delay=900)) == 600  # a boot must end within 2 rounds
    assert ces_round(CESConfig(boot_delay=1800)) == 900


def test_long_boot_does_not_stop_the_simulation_early():
    """The last job waits for a 900 s boot with nothing running: the run still finishes it."""
    cluster = shorthand_cluster(2, 8)
    ces = CESPolicy(make_policy("fifo"), cluster, CESConfig(buffer=0, boot_delay=900))
    jobs = by_id(simulate([job("a", 0, 8, 100), job("b", 1200, 16, 100)], cluster, ces))
    # Woken at 1200 (its arrival), up at 2100 and noticed then (the policy asks to decide at
    # the instant the boot ends).
    assert jobs["b"].state.value == "completed" and jobs["b"].first_start == pytest.approx(2100)


def test_a_job_arriving_between_bins_wakes_nodes_at_once():
    """Helios Algorithm 2's arrival check). 4x8, FIFO, buffer 0, boot 300 s.
    a (8 GPUs, 100 s) at 0: the first control step keeps 1 node and powers 3 down. b (16
    GPUs) arrives at 700, between the bins at 600 and 1200: one more node is woken at 700
    and is up at 1000, when b starts (not woken at the 1200 bin and started at 1500)."""
    cluster = shorthand_cluster(4, 8)
    ces = CESPolicy(make_policy("fifo"), cluster, CESConfig(buffer=0, boot_delay=300))
    jobs = by_id(simulate([job("a", 0, 8, 100), job("b", 700, 16, 100)], cluster, ces))
    assert jobs["b"].first_start == pytest.approx(1000)
    assert ces.wakeups == 1 and ces.nodes_woken == 1


def test_parse_ces_args():
    cfg = ces_config(parse_energy_args(["buffer=3", "boot_delay=120", "cooling_factor=1.5"]))
    assert (cfg.buffer, cfg.boot_delay, cfg.cooling_factor) == (3, 120.0, 1.5)
    for bad in (["nope=1"], ["buffer"], ["buffer=2.5"], ["cooling_factor=0.5"], ["boot_delay=nan"], ["buffer=inf"]):
        with pytest.raises(InputError):
            ces_config(parse_energy_args(bad))
    with pytest.raises(InputError):  # a YAML float where a node count is meant is not silently truncated
        ces_config({"buffer": 2.5})


def test_simulate_energy_ces_reports_energy_and_jct_impact(tmp_path):
    out = tmp_path / "ces"
    result = runner.invoke(app, ["simulate", "--energy", "ces", "--energy-arg", "buffer=1", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "node-hours powered down" in result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["energy_policy"] == "ces" and summary["energy_node_hours_saved"] > 0
    assert summary["energy_kwh_saved"] == pytest.approx(summary["energy_node_hours_saved"] * 2.4, rel=1e-5)
    assert summary["energy_baseline_avg_jct"] > 0 and isinstance(summary["energy_avg_jct_change_pct"], float)
    assert summary["jobs_completed"] == summary["jobs_total"]
    plain = tmp_path / "plain"
    assert runner.invoke(app, ["simulate", "--out", str(plain), "-q"]).exit_code == 0
    assert not any(k.startswith("energy_") for k in json.loads((plain / "summary.json").read_text()))


def test_simulate_energy_bad_options_exit_2():
    assert runner.invoke(app, ["simulate", "--energy", "solar", "-q"]).exit_code == 2
    assert runner.invoke(app, ["simulate", "--energy", "ces", "--energy-arg", "bufer=1", "-q"]).exit_code == 2
