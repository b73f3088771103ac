"""``shapeshift serve``: run the live controller in the foreground."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from shapeshift.cli.common import console, guarded
from shapeshift.errors import InputError
from shapeshift.model import ClusterSpec

if TYPE_CHECKING:
    from shapeshift.runtime.backends.base import Backend


def make_backend(name: str, address: str | None, cluster: ClusterSpec) -> Backend:
    if name == "local":
        from shapeshift.runtime.backends.local import LocalBackend

        return LocalBackend()
    if name == "ray":
        from shapeshift.runtime.backends.ray_backend import RayBackend

        return RayBackend(cluster, address=address or "auto")
    raise InputError(f"unknown backend {name!r}; use local or ray", field="--backend")


@guarded
def command(
    cluster: Annotated[str, typer.Option(help="NxG (e.g. 1x2) or a cluster YAML file.")] = "1x2",
    policy: Annotated[str, typer.Option(help="Registered policy name (see 'shapeshift policies').")] = "fifo",
    policy_arg: Annotated[list[str] | None, typer.Option("--policy-arg", help="Policy parameter key=value.")] = None,
    state: Annotated[
        str | None, typer.Option(help="State directory (default $SHAPESHIFT_STATE or .shapeshift).")
    ] = None,
    backend: Annotated[str, typer.Option(help="local or ray.")] = "local",
    ray_address: Annotated[str | None, typer.Option(help="Ray cluster address (ray://host:port or auto).")] = None,
    host: Annotated[str, typer.Option(help="Address to bind the API to.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="API port (0 picks a free one).")] = 0,
    round_seconds: Annotated[float | None, typer.Option("--round", help="Scheduling round in seconds.")] = None,
    stop_grace: Annotated[float, typer.Option(help="Seconds a stopped job gets to checkpoint before SIGKILL.")] = 30.0,
    poll_interval: Annotated[float, typer.Option(help="Control loop period in seconds.")] = 0.2,
    on_shutdown: Annotated[
        str,
        typer.Option(
            help="What running jobs do when the controller stops: 'leave' them running for a restarted "
            "controller to re-adopt, or 'drain' (revoke leases, checkpoint, requeue)."
        ),
    ] = "leave",
) -> None:
    """Run the controller: schedule submitted jobs on real processes with the chosen policy."""
    from shapeshift.cluster import load_cluster
    from shapeshift.policies.registry import make_policy, parse_policy_args
    from shapeshift.runtime.api import make_server
    from shapeshift.runtime.controller import Controller
    from shapeshift.runtime.remote import state_dir

    if on_shutdown not in ("leave", "drain"):
        raise InputError(f"unknown choice {on_shutdown!r}; use leave or drain", field="--on-shutdown")
    spec = load_cluster(cluster)
    pol = make_policy(policy, parse_policy_args(policy_arg))
    directory = state_dir(state)
    controller = Controller(
        Path(directory),
        spec,
        pol,
        make_backend(backend, ray_address, spec),
        host=host,
        port=port,
        poll_interval=poll_interval,
        round_seconds=round_seconds,
        stop_grace=stop_grace,
        on_shutdown=on_shutdown,
    )
    controller.start(make_server)
    console.print(
        f"shapeshift controller on {controller.url} (policy {pol.name}, backend {backend}, "
        f"{spec.total_gpus} GPU slots on {len(spec.nodes)} nodes, state {directory})",
        highlight=False,
    )

    def _stop(signum: int, frame: object) -> None:
        controller._stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    controller.wait()
    controller.shutdown()
