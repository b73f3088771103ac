"""Jobs of different tenants probing each other: under one shared job user each can read
the other's environment (lease key, env secrets), signal it and write its checkpoint;
with one uid per job from ``--job-uid-range`` the kernel refuses all three."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from shapeshift.cli.main import app
from shapeshift.errors import InputError
from shapeshift.runtime.isolation import (
    JobUidRange,
    parse_uid_range,
    resolve_job_uid_range,
    resolve_job_user,
    root_warning,
)
from tests.runtime.conftest import wait_for

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="switching jobs to other uids needs root")


def sh_job(name: str, script: str) -> str:
    return json.dumps({"name": name, "command": f"sh -c {json.dumps(script)}", "iterations": 1})


def victim(rv: Path) -> str:
    """Publishes its pid and checkpoint directory, then waits (at most 30 s) for the prober."""
    return (
        f'echo "$$ $SHAPESHIFT_CHECKPOINT_DIR" > {rv}/a.tmp && mv {rv}/a.tmp {rv}/a; i=0; '
        f"while [ ! -e {rv}/b.done ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done"
    )


def prober(rv: Path) -> str:
    """Reads the victim's environ, signals it (signal 0: the permission check alone) and
    writes into its checkpoint directory; prints what worked."""
    return (
        f"while [ ! -e {rv}/a ]; do sleep 0.1; done; read pid ckpt < {rv}/a; "
        "if cat /proc/$pid/environ > /dev/null 2>&1; then echo environ-read; else echo environ-denied; fi; "
        "if kill -0 $pid 2>/dev/null; then echo signal-sent; else echo signal-denied; fi; "
        'if touch "$ckpt/intruder" 2>/dev/null; then echo ckpt-written; else echo ckpt-denied; fi; '
        f"touch {rv}/b.done"
    )


def free_range() -> JobUidRange:
    try:
        found = resolve_job_uid_range("20000-29999")
    except InputError as exc:
        pytest.skip(f"no free uid range here: {exc}")
    assert found is not None
    return found


@root_only
@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        # One shared uid: the kernel's same-uid rules let every probe through (why a range is needed).
        ("shared-user", ["environ-read", "signal-sent", "ckpt-written"]),
        ("uid-range", ["environ-denied", "signal-denied", "ckpt-denied"]),
    ],
)
def test_two_jobs_probing_each_other(live, tmp_path, mode, expected):
    for directory in (tmp_path, tmp_path.parent, tmp_path.parent.parent):  # pytest's are 0700:
        directory.chmod(directory.stat().st_mode | 0o111)  # let job users reach their directories
    rv = tmp_path / "rv"
    rv.mkdir()
    rv.chmod(0o1777)  # where the two jobs meet, as a shared /tmp would let them
    identity = resolve_job_user("nobody") if mode == "shared-user" else free_range()
    controller, client = live("1x2", job_user=identity)
    a = client.submit(sh_job("victim", victim(rv)))
    b = client.submit(sh_job("prober", prober(rv)))
    for job_id in (a, b):
        wait_for(lambda j=job_id: client.job(j)["state"] in ("completed", "failed"), 40, f"job {job_id}")
    assert client.job(b)["state"] == "completed", client.logs(b)
    assert [
        line for line in client.logs(b).splitlines() if line.endswith(("-read", "-denied", "-sent", "-written"))
    ] == expected
    if mode == "uid-range":
        assert isinstance(identity, JobUidRange)
        ckpt = controller.job_dir(a) / "checkpoint"
        info = ckpt.stat()
        # Job ids 1 and 2 get uids 20000 and 20001 (LO + id - 1); the checkpoint is 0700 and the job's.
        assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (20000, 20000, 0o700)
        assert (controller.job_dir(b) / "checkpoint").stat().st_uid == 20001
        assert not (ckpt / "intruder").exists()


@root_only
def test_two_jobs_with_one_uid_from_the_range_never_run_at_once(live, tmp_path):
    for directory in (tmp_path, tmp_path.parent, tmp_path.parent.parent):
        directory.chmod(directory.stat().st_mode | 0o111)
    free_range()
    # A range of one uid: jobs 1 and 2 both map to 20000, so the second waits for the first
    # although the cluster has a free GPU for it.
    rv = tmp_path / "rv"
    rv.mkdir()
    rv.chmod(0o1777)
    _, client = live("1x2", job_user=JobUidRange(20000, 20000))
    a = client.submit(sh_job("first", f"touch {rv}/first-started; sleep 1; test ! -e {rv}/second-started"))
    b = client.submit(sh_job("second", f"touch {rv}/second-started"))
    for job_id in (a, b):
        wait_for(lambda j=job_id: client.job(j)["state"] in ("completed", "failed"), 40, f"job {job_id}")
    assert client.job(a)["state"] == "completed", client.logs(a)
    assert client.job(b)["state"] == "completed", client.logs(b)


def test_uid_of_a_job_is_stable_and_within_the_range():
    ids = JobUidRange(20000, 20009)
    # LO + (id - 1) mod 10: job 1 -> 20000, job 10 -> 20009, job 11 wraps to 20000.
    assert [ids.uid_of(j) for j in ("1", "10", "11")] == [20000, 20009, 20000]
    assert ids.for_job("3").wrap(("true",)) == (
        "setpriv",
        "--reuid=20002",
        "--regid=20002",
        "--clear-groups",
        "--",
        "true",
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("20000", "is not a uid range"),
        ("a-b", "is not a uid range"),
        ("30000-20000", "low end is above the high end"),
        ("0-100", "must lie within"),
        ("1000-99999999999", "is not a uid range"),
    ],
)
def test_bad_uid_ranges_are_refused(text, message):
    with pytest.raises(InputError, match=message):
        parse_uid_range(text)


@root_only
def test_a_range_holding_an_account_is_refused():
    with pytest.raises(InputError, match="lies in"):
        resolve_job_uid_range("1000-4294967293")  # holds nobody (65534) at least


@root_only
def test_serve_as_root_without_a_job_user_says_so_in_one_line(serve_process, tmp_path):
    proc = serve_process()
    log = tmp_path / "serve0.log"
    wait_for(lambda: "jobs run as root" in log.read_text(), 10, "the warning")
    lines = [line for line in log.read_text().splitlines() if "jobs run as root" in line]
    assert len(lines) == 1 and "can read the controller's state" in lines[0], lines
    assert proc.poll() is None
    assert root_warning(JobUidRange(20000, 20001)) is None


def test_serve_refuses_both_job_user_and_uid_range(tmp_path):
    result = CliRunner().invoke(
        app, ["serve", "--state", str(tmp_path / "s"), "--job-user", "nobody", "--job-uid-range", "20000-20001"]
    )
    assert result.exit_code == 2 and "not both" in result.output, result.output
