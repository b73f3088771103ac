"""Driving the authors' Go simulator: reading its log, and the guards around building it."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from shapeshift.errors import InputError
from shapeshift.gpushare import reference as ref
from shapeshift.gpushare.report import curve

ROOT = Path(__file__).resolve().parents[2]

# Lines in the shape SchedulePods / ClusterGpuFragReport log them (pkg/simulator/simulator.go,
# pkg/simulator/analysis.go): per pod event one "attempt to create", an optional "failed to
# schedule", then the origin and bellman [Report] lines and the [Alloc] line.
LOG = """\
level=info msg="[Report]; Frag amount: 9.00; Frag ratio: 1.00%; Q124 ratio: 0.00%; (origin)\\n"
level=info msg="[Alloc]; Used nodes: 0; Used GPUs: 0; Used GPU Milli: 0; Total GPUs: 2; Arrived GPU Milli: 0\\n"
level=info msg="[0] attempt to create pod(paib-gpu/openb-pod-0001)\\n"
level=info msg="pod(paib-gpu/openb-pod-0001) is scheduled to node(0001-openb-node-0001)\\n"
level=info msg="[Report]; Frag amount: 100.50; Frag ratio: 6.70%; Q124 ratio: 0.00%; (origin)\\n"
level=info msg="[Report]; Frag amount: 7.00; Frag ratio: 0.47%; (bellman)\\n"
level=info msg="[Alloc]; Used nodes: 1; Used GPUs: 2; Used GPU Milli: 500; Total GPUs: 2; Arrived GPU Milli: 500\\n"
level=info msg="[1] attempt to create pod(paib-gpu/openb-pod-0002)\\n"
level=info msg="[1] failed to schedule pod(paib-gpu/openb-pod-0002): <CPU: 4.00, GPU: 1 x {1000}m ()>\\n"
level=info msg="[Report]; Frag amount: 200.00; Frag ratio: 13.33%; Q124 ratio: 0.00%; (origin)\\n"
level=info msg="[Report]; Frag amount: 8.00; Frag ratio: 0.53%; (bellman)\\n"
level=info msg="[Alloc]; Used nodes: 1; Used GPUs: 2; Used GPU Milli: 500; Total GPUs: 2; Arrived GPU Milli: 1500\\n"
"""


def test_parse_log_reads_one_event_per_pod(tmp_path):
    path = tmp_path / "run.log"
    path.write_text(LOG)
    events, total = ref.parse_log(path)
    # The report before the first pod (the empty cluster) is not an event. Pod 0: placed,
    # 500 milli used of 2 GPUs -> idle 2000 - 500 = 1500; the origin line's 100.50 is its
    # fragmented milli (the bellman line is another measure). Pod 1: dropped, arrived grows
    # by its 1000 milli, used stays 500.
    assert total == 2
    assert events.arrived_milli.tolist() == [500, 1500]
    assert events.allocated_milli.tolist() == [500, 500]
    assert events.fragmented_milli.tolist() == [100.5, 200.0]
    assert events.idle_milli.tolist() == [1500, 1500]
    assert events.placed.tolist() == [True, False]
    # Binned as their analysis bins: arrived 500 / 2 GPUs / 10 = 25%, allocated 25%; 1500 -> 75%.
    rows = {r["arrived_pct"]: r["allocated_pct"] for r in curve(events, total, 75)}
    assert rows == {24: 25.0, 25: 25.0, 26: 25.0, 74: 25.0, 75: 25.0}


def test_parse_log_refuses_an_alloc_line_without_its_report(tmp_path):
    path = tmp_path / "run.log"
    lines = [line for line in LOG.splitlines() if "100.50" not in line]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(RuntimeError, match="without its \\[Report\\]"):
        ref.parse_log(path)


def test_the_simulator_must_live_outside_this_repository(tmp_path):
    with pytest.raises(InputError, match="inside this repository"):
        ref.check_outside(ROOT / "build" / "sim", ROOT)
    ref.check_outside(tmp_path / "sim", ROOT)


def test_a_node_list_other_than_the_committed_yamls_source_is_refused(tmp_path):
    checkout = tmp_path / "sim"
    (checkout / "data" / "csv").mkdir(parents=True)
    (checkout / "data" / "csv" / ref.NODE_CSV).write_text("sn,cpu_milli,memory_mib,gpu,model\nn1,1000,1024,1,V100M16\n")
    ours = tmp_path / ref.NODE_CSV
    ours.write_text("sn,cpu_milli,memory_mib,gpu,model\nn1,2000,1024,1,V100M16\n")
    with pytest.raises(InputError, match="differs from the reference"):
        ref.prepare_input(checkout, tmp_path / "pods.csv", ours)


def test_without_go_the_peer_script_says_why_and_skips(tmp_path):
    env = {"PATH": str(Path(sys.executable).parent), "PYTHONPATH": str(ROOT / "src")}
    args = ["--data", str(tmp_path), "--out", str(tmp_path / "o"), "--simulator", str(tmp_path / "sim")]
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "peer_fgd.py"), *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("skipped: go is not on PATH")


def _peer_script():
    spec = importlib.util.spec_from_file_location("peer_fgd", ROOT / "scripts" / "peer_fgd.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_stopped_reference_run_is_compared_over_the_percents_it_reached():
    # A run stopped at 18% has no values from 17% on: the gap is taken over the points both
    # curves have (here |1.0 - 1.5| at 1%), and a curve with no common point gives no gap
    # instead of failing on an all-NaN slice.
    peer = _peer_script()
    nan = float("nan")
    assert peer.max_gap([0.25, 1.0, nan], [0.25, 1.5, 2.0], [0, 1, 2]) == (0.5, 1)
    assert peer.max_gap([nan, nan], [1.0, 2.0], [50, 51]) == (None, None)
