"""Figures, the self-contained HTML report and the ``analyze trace`` command."""

from __future__ import annotations

import base64
import json

import pandas as pd
from typer.testing import CliRunner

from shapeshift.analysis.characterize import characterize
from shapeshift.analysis.figures import write_figures
from shapeshift.analysis.html_report import write_report
from shapeshift.cli.main import app
from shapeshift.page_style import PAGE_CSS
from tests.analysis.test_characterize import MONDAY, mixed, workload

runner = CliRunner()


def test_figures_are_written_and_embedded(tmp_path):
    rows = [
        {
            "submit_time": float(i * 1800),
            "num_gpus": 1 + (i % 3),
            "duration": 600.0 + i,
            "vc": "ab"[i % 2],
            "user": f"u{i % 4}",
        }
        for i in range(40)
    ]
    w = workload(rows, state=["COMPLETED", "FAILED"] * 20, queue=[float(i) for i in range(40)])
    ch = characterize(w, origin=MONDAY)
    figures = write_figures(ch, tmp_path)
    names = {p.name for _, p in figures}
    expected = {"duration_cdf.png", "job_size.png", "diurnal.png", "submissions.png", "utilization.png"}
    assert expected | {"per_vc.png", "status.png", "users.png"} == names
    for _, path in figures:
        assert path.stat().st_size > 0 and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report = write_report(ch, figures, tmp_path / "report.html").read_text()
    assert PAGE_CSS in report  # drawn like the live dashboard
    assert report.count("data:image/png;base64,") == len(figures)
    for _, path in figures:
        assert base64.b64encode(path.read_bytes()).decode() in report
    assert "<img" in report and 'src="duration_cdf.png"' not in report  # embedded, not linked


def test_figures_skip_what_the_trace_lacks(tmp_path):
    ch = characterize(mixed(), origin=None)
    names = {p.name for _, p in write_figures(ch, tmp_path)}
    assert "status.png" not in names and "duration_cdf.png" in names
    report = write_report(ch, [], tmp_path / "report.html").read_text()
    assert "Omitted" in report and "final-status" in report


def test_analyze_trace_command_writes_outputs(tmp_path):
    trace = tmp_path / "trace.csv"
    pd.DataFrame(
        {
            "job_id": ["a", "b", "c"],
            "submit_time": ["2024-01-01T00:00:00", "2024-01-01T01:00:00", "2024-01-02T05:00:00"],
            "num_gpus": [1, 8, 2],
            "duration": [100, 200, 300],
            "vc": ["x", "x", "y"],
        }
    ).to_csv(trace, index=False)
    out = tmp_path / "out"
    result = runner.invoke(app, ["analyze", "trace", str(trace), "--out", str(out), "--cluster", "2x8"])
    assert result.exit_code == 0, result.output
    stats = json.loads((out / "stats.json").read_text())
    assert stats["jobs"] == 3 and stats["origin"] == "2024-01-01T00:00:00"
    assert stats["durations"]["gpu"]["median_s"] == 200.0
    assert stats["timing_source"] == "fifo replay on 2x8"
    assert "status" in stats["omitted"]
    assert (out / "report.html").stat().st_size > 0 and (out / "duration_cdf.png").stat().st_size > 0


def test_analyze_trace_bad_input_exits_2(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("job_id,submit_time,num_gpus,duration\n1,0,x,10\n")
    result = runner.invoke(app, ["analyze", "trace", str(bad), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "num_gpus" in result.output
    missing = runner.invoke(app, ["analyze", "trace", str(tmp_path / "nope.csv"), "--out", str(tmp_path / "o")])
    assert missing.exit_code == 2
