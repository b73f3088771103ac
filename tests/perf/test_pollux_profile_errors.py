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


def _app(root: Path, name: str = "toy", files: dict[str, str] | None = None) -> Path:
    """A profile directory of good tables, ``files`` replacing some (an empty text: absent)."""
    app_dir = root / name
    app_dir.mkdir(parents=True)
    texts = {"placements.csv": PLACEMENTS, "scalability.csv": SCALE, "validation-16.csv": VALIDATION}
    for file, text in {**texts, **(files or {})}.items():
        if text:
            (app_dir / file).write_text(text)
    return app_dir


@pytest.mark.parametrize(
    ("files", "where", "field"),
    [
        ({"validation-16.csv": ""}, "toy", None),  # no validation file at all
        ({"placements.csv": "placement,local_bsz,step_time\n1,16,0.05\n"}, "placements.csv", "sync_time"),
        ({"scalability.csv": SCALE.replace("0.08", "nan")}, "scalability.csv", "step_time"),
        ({"validation-16.csv": VALIDATION.replace("1.0,0.0", "inf,0.0")}, "validation-16.csv", "grad_sqr"),
    ],
)
def test_a_broken_profile_names_its_file_and_field(tmp_path, files, where, field):
    directory = _app(tmp_path, files=files)
    with pytest.raises(InputError) as caught:
        ApplicationProfile(directory)
    assert caught.value.path is not None and caught.value.path.endswith(where)
    assert caught.value.field == field


def test_the_cli_refuses_it_in_one_line(tmp_path):
    _app(tmp_path / "profiles", "cifar10", {"validation-16.csv": ""})
    workload = tmp_path / "w.csv"
    workload.write_text("name,time,application,num_replicas,batch_size\ncifar10-0,0,cifar10,1,128\n")
    argv = ["simulate", "--workload", str(workload), "--format", "pollux", "--cluster", "1x4"]
    result = CliRunner().invoke(app, [*argv, "--throughput", f"pollux:{tmp_path / 'profiles'}", "--quiet"])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "validation-<batch>.csv" in lines[0], lines
