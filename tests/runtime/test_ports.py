"""Rendezvous ports come from outside the ephemeral range, bind when handed out, and are
never handed to two live runs at once (``runtime/ports.py``)."""

from __future__ import annotations

import socket

import pytest

from shapeshift.runtime.ports import BAND, DEFAULT_EPHEMERAL, RendezvousPorts, ephemeral_range, outside_band

# Linux's default range 32768-60999: the band is the 8,192 ports just below it.
LINUX = (32768, 60999)


def _listener_in(band: range) -> tuple[socket.socket, int]:
    """A socket listening on some port of ``band`` (whichever binds first)."""
    for port in band:
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            s.close()
            continue
        s.listen()
        return s, port
    pytest.skip("no port of the band binds on this host")


def test_the_band_lies_just_below_the_ephemeral_range():
    assert outside_band(LINUX) == range(32768 - BAND, 32768)


def test_a_range_starting_low_puts_the_band_above_it_and_a_full_range_leaves_none():
    # 2000 - 8192 < 1024, so below has no room; above 50000 there is.
    assert outside_band((2000, 50000)) == range(50001, 50001 + BAND)
    # 1024-65535: no room on either side.
    assert outside_band((1024, 65535)) == range(0)


def test_ports_are_taken_from_the_band_and_differ_while_held():
    ports = RendezvousPorts(ephemeral=LINUX, start=0)
    a, b = ports.take("run-a"), ports.take("run-b")
    assert a in ports.band and b in ports.band
    assert a != b


def test_a_released_port_is_not_reused_before_the_band_comes_round():
    # Each search starts after the last port handed out, so a finished run's port (its
    # store may linger in TIME_WAIT) is not the next one handed out.
    ports = RendezvousPorts(ephemeral=LINUX, start=0)
    a = ports.take("run-a")
    ports.release("run-a")
    assert ports.take("run-b") != a


def test_a_port_someone_listens_on_is_skipped():
    probe = RendezvousPorts(ephemeral=LINUX)
    listener, busy = _listener_in(probe.band)
    with listener:
        ports = RendezvousPorts(ephemeral=LINUX, start=probe.band.index(busy))
        got = ports.take("run-a")
    assert got != busy and got in ports.band


def test_without_room_the_kernel_chooses():
    ports = RendezvousPorts(ephemeral=(1024, 65535))
    port = ports.take("run-a")
    assert 0 < port <= 65535


def test_the_range_is_read_from_the_kernel_file_and_garbage_falls_back(tmp_path):
    good, bad, odd = tmp_path / "good", tmp_path / "bad", tmp_path / "odd"
    good.write_text("40000\t60999\n")
    bad.write_text("not numbers\n")
    odd.write_text("60999 40000\n")  # low above high
    assert ephemeral_range(good) == (40000, 60999)
    assert ephemeral_range(bad) == DEFAULT_EPHEMERAL
    assert ephemeral_range(odd) == DEFAULT_EPHEMERAL
    assert ephemeral_range(tmp_path / "missing") == DEFAULT_EPHEMERAL
