"""A broken Pollux profile directory is refused with the file and field named, exit 2,
never a traceback (a directory without ``validation-<batch>.csv`` once ended in an
``IndexError``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from shapeshift.cli.main import app
from shapeshift.errors import InputError
from shapeshift.perf.pollux.profiles import ApplicationProfile

VALIDATION = "progress,iteration,metric,grad_sqr,grad_var\n100,100,0.5,1.0,0.0\n"
PLACEMENTS = "placement,local_bsz,step_time,sync_time\n1,16,0.05,0.0\n2,16,0.06,0.01\n"
SCALE = "num_nodes,num_replicas,local_bsz,step_time,sync_time\n2,2,16,0.08,0.03\n"


def _app(root: Path, name: str = "toy", **files: str) -> Path:
    app_dir = root / name
    app_dir.mkdir(parents=True)
    texts = {"placements.csv": PLACEMENTS, "scalability.csv": SCALE, "validation-16.csv": VALIDATION}
    texts.update({name.replace("_", "-").replace("-csv", ".csv"): text for name, text in files.items()})
    for name, text in texts.items():
        if text:
            (app_dir / name).write_text(text)
    return app_dir


@pytest.mark.parametrize(
    ("files", "where", "field"),
    [
        ({"validation_16_csv": ""}, "toy", None),  # no validation file at all
        ({"placements_csv": "placement,local_bsz,step_time\n1,16,0.05\n"}, "placements.csv", "sync_time"),
        ({"scalability_csv": SCALE.replace("0.08", "nan")}, "scalability.csv", "step_time"),
        ({"validation_16_csv": VALIDATION.replace("1.0,0.0", "inf,0.0")}, "validation-16.csv", "grad_sqr"),
    ],
)
def test_a_broken_profile_names_its_file_and_field(tmp_path, files, where, field):
    directory = _app(tmp_path, **files)
    with pytest.raises(InputError) as caught:
        ApplicationProfile(directory)
    assert caught.value.path is not None and caught.value.path.endswith(where)
    assert caught.value.field == field


def test_the_cli_refuses_it_in_one_line(tmp_path):
    _app(tmp_path / "profiles", "cifar10", validation_16_csv="")
    workload = tmp_path / "w.csv"
    workload.write_text("name,time,application,num_replicas,batch_size\ncifar10-0,0,cifar10,1,128\n")
    argv = ["simulate", "--workload", str(workload), "--format", "pollux", "--cluster", "1x4"]
    result = CliRunner().invoke(app, [*argv, "--throughput", f"pollux:{tmp_path / 'profiles'}", "--quiet"])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "validation-<batch>.csv" in lines[0], lines
