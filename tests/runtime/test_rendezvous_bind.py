"""The reference trainer's ranks listen only on the address the controller chose.

With ``init_process_group(init_method="tcp://127.0.0.1:PORT")`` rank 0's TCP store
listened on ``*:PORT``: reachable from every interface of the host. Two ranks train here;
once a checkpoint shows they have taken steps (so every socket the group opens is open),
every listening socket of both processes must be on a loopback address.
"""

from __future__ import annotations

import ipaddress
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shapeshift.runtime.ports import RendezvousPorts

pytest.importorskip("torch")
pytestmark = pytest.mark.slow


def _address(hex_address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    raw = bytes.fromhex(hex_address)
    if len(raw) == 4:
        return ipaddress.IPv4Address(raw[::-1])  # /proc/net/tcp: host byte order
    words = [raw[i : i + 4][::-1] for i in range(0, 16, 4)]  # /proc/net/tcp6: four host-order words
    return ipaddress.IPv6Address(b"".join(words))


def listening(pid: int) -> list[tuple[str, int]]:
    """``(address, port)`` of every TCP socket ``pid`` listens on (from /proc)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                address, port = fields[1].split(":")
                found.append((str(_address(address)), int(port, 16)))
    return found


def _loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    mapped = getattr(ip, "ipv4_mapped", None)
    return (mapped or ip).is_loopback


def test_ranks_listen_on_loopback_only(tmp_path):
    port = RendezvousPorts().take("test")
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
        env.pop("GLOO_SOCKET_IFNAME", None)
        argv = [
            sys.executable,
            "-m",
            "shapeshift.train",
            "--iterations",
            "400",
            "--global-batch",
            "8",
            "--min-iter-time",
            "0.05",
            "--checkpoint-every",
            "1",
            "--checkpoint-dir",
            str(tmp_path / "ckpt"),
        ]
        ranks.append(subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    try:
        deadline = time.monotonic() + 90  # start-up (importing torch) and a step take seconds
        while not (tmp_path / "ckpt" / "trainer.pt").exists():
            assert time.monotonic() < deadline, "no step taken within 90 s"
            assert all(p.poll() is None for p in ranks), "a rank exited early"
            time.sleep(0.2)
        sockets = {rank: listening(p.pid) for rank, p in enumerate(ranks)}
    finally:
        for proc in ranks:
            proc.kill()
            proc.wait()
    assert ("127.0.0.1", port) in sockets[0], sockets  # the store, on the chosen address
    exposed = {rank: [s for s in found if not _loopback(s[0])] for rank, found in sockets.items()}
    assert exposed == {0: [], 1: []}, sockets
