"""A distributed trainer rank exits once its work is done, even where tearing the
process group down would block.

The bug: in CI a dp=2 job's rank 0 ran all its steps and exited 0, while rank 1, which
had trained beside it and passed the last barrier, never exited, so the job looked
running until the test gave up (300 s). The trainer tore gloo down in a thread with a
10 s timeout; a teardown blocked in C++ while holding the GIL stops that timeout from
ever firing. Here ``destroy_process_group`` is replaced, in both ranks, by a C call
that holds the GIL for two minutes (``ctypes.PyDLL`` does not release it): a rank that
still tears down hangs, one that leaves at once exits 0 in seconds.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from shapeshift.runtime.ports import RendezvousPorts

pytest.importorskip("torch")
pytestmark = pytest.mark.slow

BLOCKING_TEARDOWN = (
    "import ctypes, sys, torch.distributed as dist\n"
    "dist.destroy_process_group = lambda *a, **k: ctypes.PyDLL(None).sleep(120)\n"
    "from shapeshift.train.trainer import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def test_both_ranks_exit_at_once_though_the_teardown_would_block(tmp_path):
    port = RendezvousPorts().take("test")  # as the controller picks it
    ranks = []
    for rank in (0, 1):
        env = {
            **os.environ,
            "WORLD_SIZE": "2",
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "OMP_NUM_THREADS": "1",
        }
        argv = [sys.executable, "-c", BLOCKING_TEARDOWN, "--iterations", "2", "--global-batch", "8",
                "--checkpoint-dir", str(tmp_path / "ckpt")]
        ranks.append(subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    deadline = time.monotonic() + 90  # start-up and two steps take a few seconds; the block lasts 120 s
    try:
        codes = [proc.wait(timeout=max(deadline - time.monotonic(), 1)) for proc in ranks]
    except subprocess.TimeoutExpired:
        pytest.fail("a rank was still running 90 s after start: it waited on the process group's teardown")
    finally:
        for proc in ranks:
            proc.kill()
            proc.wait()
    logs = [proc.stdout.read().decode(errors="replace")[-2000:] for proc in ranks if proc.stdout]
    assert codes == [0, 0], logs
    assert (tmp_path / "ckpt" / "result.json").exists()
