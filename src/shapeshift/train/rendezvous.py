"""Where the reference trainer's ranks meet: rank 0's TCP store, on the address the
controller chose.

``init_process_group(init_method="tcp://ADDR:PORT")`` makes rank 0 start a TCP store that
listens on every interface (``*:PORT``), whatever ``ADDR`` says: anyone who can reach the
host can then connect to it and read or write the group's keys. Here rank 0 binds the
port itself, on ``MASTER_ADDR`` only, and hands the listening socket to the store
(``master_listen_fd``). Gloo's own connections between ranks go through the interface
named by ``GLOO_SOCKET_IFNAME``; when the ranks meet on a loopback address (one host),
that is the loopback interface, unless the environment already names one.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from datetime import timedelta
from typing import Any


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _loopback_interface() -> str | None:
    names = [name for _, name in socket.if_nameindex()]
    return "lo" if "lo" in names else None


def listen_socket(host: str, port: int, backlog: int = 1024) -> socket.socket:
    """A listening TCP socket on ``host:port`` only."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(backlog)
    except BaseException:
        sock.close()
        raise
    return sock


def rendezvous(master_addr: str, master_port: int, rank: int, world_size: int, timeout: timedelta) -> Any:
    """The process group's store: rank 0 serves it on ``master_addr:master_port`` alone,
    the other ranks connect to it. Call before ``init_process_group(store=...)``."""
    import torch.distributed as dist

    if _is_loopback(master_addr) and "GLOO_SOCKET_IFNAME" not in os.environ:
        interface = _loopback_interface()
        if interface is not None:
            os.environ["GLOO_SOCKET_IFNAME"] = interface
    if rank != 0:
        return dist.TCPStore(master_addr, master_port, world_size, False, timeout)
    # The store owns the descriptor from here on (detach: Python must not close it).
    fd = listen_socket(master_addr, master_port).detach()
    return dist.TCPStore(
        master_addr, master_port, world_size, True, timeout, wait_for_workers=False, master_listen_fd=fd
    )
