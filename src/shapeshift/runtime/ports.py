"""Rendezvous ports for runs: picked where nothing on the host takes them implicitly.

A run's ranks meet at rank 0's TCP store on ``MASTER_PORT``. The controller picks the
port when it lays the run out, and rank 0 binds it only seconds later, once its framework
is imported (much later on a loaded host), so the port must stay free in between.

Asking the kernel for a free port (bind to port 0, read it, close) returns one from the
*ephemeral* range, the range every outgoing connection on the host also draws its local
port from: a worker's report to the controller can take the port in that window (rank 0
then fails to bind), and a rank that connects before rank 0 listens can be given the
port as its own local port and connect to itself (TCP simultaneous open), waiting on a
store that is not there. The kernel never hands out ports below the ephemeral range on
its own, so only a program binding that very number can take one of those. Here a port
is taken from a band just below the range, checked to bind at that moment, and never
handed to two live runs at once. Where the range leaves no room (it spans nearly every
port), the kernel's choice is used, as before.

torchrun's fixed default (29500) is below the range for the same reason; PyTorch and
vLLM discuss the race in pytorch/pytorch#47461 and vllm-project/vllm#36330.
"""

from __future__ import annotations

import itertools
import os
import socket
from collections.abc import Hashable
from pathlib import Path

#: Linux's default ``net.ipv4.ip_local_port_range``, used where it cannot be read.
DEFAULT_EPHEMERAL = (32768, 60999)
#: Ports in the band below (or above) the ephemeral range that runs may use.
BAND = 8192
#: The lowest port used: below are the well-known and privileged ones.
LOWEST = 1024
_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
#: Pickers made in this process so far: each starts its search elsewhere in the band.
_PICKERS = itertools.count()


def ephemeral_range(path: Path = _RANGE_FILE) -> tuple[int, int]:
    """The host's ephemeral port range (``low``, ``high``), both included."""
    try:
        low, high = (int(part) for part in path.read_text().split())
    except (OSError, ValueError):
        return DEFAULT_EPHEMERAL
    return (low, high) if LOWEST <= low <= high <= 65535 else DEFAULT_EPHEMERAL


def kernel_port(host: str = "127.0.0.1") -> int:
    """A port the kernel says is free now (from the ephemeral range)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def binds(host: str, port: int) -> bool:
    """Whether a TCP socket can bind ``host:port`` right now."""
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def outside_band(ephemeral: tuple[int, int]) -> range:
    """Up to ``BAND`` ports just below the ephemeral range, else just above it; empty
    when neither side has ``BAND`` ports."""
    low, high = ephemeral
    if low - BAND >= LOWEST:
        return range(low - BAND, low)
    if high + BAND <= 65535:
        return range(high + 1, high + 1 + BAND)
    return range(0)


class RendezvousPorts:
    """Hands out rendezvous ports outside the ephemeral range, one per live owner (a run).

    ``start``: where in the band the first search begins (default: from the process id
    and how many pickers this process made, so controllers on one host start apart).
    Each search starts after the last port handed out, so a port a finished run's store
    left in ``TIME_WAIT`` comes round again only after the whole band."""

    def __init__(self, host: str = "127.0.0.1", ephemeral: tuple[int, int] | None = None, start: int | None = None):
        self.host = host
        self.band = outside_band(ephemeral if ephemeral is not None else ephemeral_range())
        if start is None:
            start = os.getpid() * 997 + next(_PICKERS) * 1021
        self._next = start % max(len(self.band), 1)
        self._held: dict[Hashable, int] = {}
        self._in_use: set[int] = set()

    def take(self, owner: Hashable) -> int:
        """A port for ``owner``, free now and held by no other owner until ``release``."""
        self.release(owner)
        band, count = self.band, len(self.band)
        for step in range(count):
            at = (self._next + step) % count
            port = band[at]
            if port not in self._in_use and binds(self.host, port):
                self._next = (at + 1) % count
                return self._hold(owner, port)
        return self._hold(owner, kernel_port(self.host))  # nothing free in the band (or no band)

    def release(self, owner: Hashable) -> None:
        """``owner`` no longer needs its port (its ranks are gone)."""
        port = self._held.pop(owner, None)
        if port is not None:
            self._in_use.discard(port)

    def _hold(self, owner: Hashable, port: int) -> int:
        self._held[owner] = port
        self._in_use.add(port)
        return port
