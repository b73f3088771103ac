"""Checks ``shapeshift serve`` (and the commands that open the state database directly)
runs before doing anything, so each way a start can fail is one clear sentence naming the
flag or file, not a traceback halfway through recovery."""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import socket
import sqlite3
from pathlib import Path

from shapeshift.errors import InputError
from shapeshift.runtime.state_files import DB_FILE


def check_state_dir(path: Path) -> None:
    """``--state`` must be a directory (whether it can be written is checked by creating it)."""
    if path.exists() and not path.is_dir():
        raise InputError(f"{path} is a file; --state needs a directory", field="--state")


def check_database(path: Path) -> None:
    """An existing ``state.db`` must be a readable, intact SQLite database.

    A truncated or overwritten file would otherwise fail deep inside recovery. We refuse
    to start rather than start afresh: the file holds every submitted job."""
    db = path / DB_FILE
    if not db.exists() or db.stat().st_size == 0:
        return
    try:
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)) as conn:
            result = conn.execute("PRAGMA quick_check").fetchone()
            conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
    except sqlite3.Error as exc:
        raise InputError(
            f"{db} cannot be read as a state database ({exc}); restore it from a backup, or move it aside to "
            "start with an empty queue"
        ) from None
    if result is None or result[0] != "ok":
        raise InputError(f"{db} is damaged ({result[0] if result else 'no answer'}); restore it or move it aside")


def check_port(host: str, port: int) -> None:
    """The address must be bindable now (port in use, unknown host -> one line)."""
    if not 0 <= port <= 65535:
        raise InputError(f"{port} is not a TCP port (0-65535; 0 picks a free one)", field="--port")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((host, port))
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise InputError(f"port {port} on {host} is already in use; pick another or 0", field="--port") from None
        reason = exc.strerror or str(exc)
        raise InputError(f"cannot listen on {host}:{port}: {reason}", field="--host") from None


def check_positive(value: float | None, flag: str) -> None:
    if value is not None and not (value > 0 and value < float("inf")):
        raise InputError(f"must be a finite number > 0, got {value}", field=flag)


def exposure_warning(host: str) -> str | None:
    """One line naming the exposure when ``--host`` is not a loopback address, else None.

    The API is plain HTTP: tokens and job files cross the network in clear, and anyone
    who reaches the port can try tokens and hold connections (each address's share is
    capped, not zero). A host name counts as loopback only if every address it resolves
    to is one."""
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)}
    except (OSError, UnicodeError):
        addresses = {host}
    exposed = sorted(a for a in addresses if not _is_loopback(a))
    if not exposed:
        return None
    where = "every interface" if any(a in ("0.0.0.0", "::") for a in exposed) else ", ".join(exposed)
    return (
        f"warning: --host {host} exposes the API on {where}, over plain HTTP (tokens and job files "
        "in clear, reachable by anyone who can reach this host); bind 127.0.0.1 and put a TLS proxy in front"
    )


def _is_loopback(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address.split("%")[0])
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)
    return (mapped or ip).is_loopback
