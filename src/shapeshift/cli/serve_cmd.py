"""``shapeshift serve``: run the live controller in the foreground."""

from __future__ import annotations

import socket
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from shapeshift.cli.common import console, err_console, guarded, output_dir
from shapeshift.errors import InputError
from shapeshift.model import ClusterSpec

if TYPE_CHECKING:
    from shapeshift.runtime.backends.base import Backend


def make_backend(name: str, address: str | None, cluster: ClusterSpec) -> Backend:
    if name == "local":
        from shapeshift.runtime.backends.local import LocalBackend

        return LocalBackend()
    if name == "ray":
        if cluster.gpu_share_limit > 1:
            # Ray reserves a whole slot per rank: two ranks on one GPU would wait for each other.
            raise InputError(
                "GPU sharing (gpu_share_limit above 1) needs the local backend: Ray reserves a whole GPU per rank",
                field="--backend",
            )
        _probe_ray(address)
        try:
            from shapeshift.runtime.backends.ray_backend import RayBackend
        except ImportError:
            raise InputError("the Ray backend needs Ray: pip install 'shapeshift[ray]'", field="--backend") from None
        try:
            return RayBackend(cluster, address=address or "auto")
        except Exception as exc:  # ray raises ConnectionError, RuntimeError, ValueError, ...
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise InputError(
                f"cannot reach a Ray cluster at {address or 'auto'}: {first}", field="--ray-address"
            ) from None
    raise InputError(f"unknown backend {name!r}; use local or ray", field="--backend")


def _probe_ray(address: str | None) -> None:
    """Refuse an explicit Ray address that does not accept connections, in at most 5 s
    (Ray itself retries an unreachable head for minutes before giving up)."""
    if not address or address == "auto":
        return
    hostport = address.removeprefix("ray://").rstrip("/")
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise InputError(f"{address!r} is not auto, HOST:PORT or ray://HOST:PORT", field="--ray-address")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=5).close()
    except OSError as exc:
        reason = exc.strerror or str(exc) or type(exc).__name__
        raise InputError(f"cannot reach a Ray cluster at {address}: {reason}", field="--ray-address") from None


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
    work_dir: Annotated[
        str | None, typer.Option(help="Where job attempt and checkpoint directories go (default: DIR-jobs).")
    ] = None,
    job_user: Annotated[
        str | None, typer.Option(help="Run jobs as this unprivileged user (controller as root): they cannot read DIR.")
    ] = None,
    job_uid_range: Annotated[
        str | None,
        typer.Option(
            help="Run each job as its own uid from LO-HI, ids no account uses (controller as root): "
            "jobs can read neither DIR nor each other."
        ),
    ] = None,
    on_shutdown: Annotated[
        str,
        typer.Option(
            help="What running jobs do when the controller stops: 'leave' them running for a restarted "
            "controller to re-adopt, or 'drain' (revoke leases, checkpoint, requeue)."
        ),
    ] = "leave",
    shutdown_timeout: Annotated[
        float | None,
        typer.Option(
            help="Seconds a stop (SIGTERM/SIGINT) may take before the process exits anyway; a second signal "
            "exits at once (default: 60, plus --stop-grace with --on-shutdown drain)."
        ),
    ] = None,
) -> None:
    """Run the controller: schedule submitted jobs on real processes with the chosen policy."""
    from shapeshift.cluster import load_cluster
    from shapeshift.policies.framework.registry import make_policy, parse_policy_args
    from shapeshift.runtime.api import make_server
    from shapeshift.runtime.controller import Controller
    from shapeshift.runtime.isolation import resolve_job_uid_range, resolve_job_user, root_warning
    from shapeshift.runtime.preflight import (
        check_database,
        check_port,
        check_positive,
        check_state_dir,
        exposure_warning,
    )
    from shapeshift.runtime.remote import state_dir
    from shapeshift.runtime.shutdown import BoundedShutdown, default_deadline
    from shapeshift.runtime.store import StateUnavailable
    from shapeshift.sim.simulator import hand_replay

    if on_shutdown not in ("leave", "drain"):
        raise InputError(f"unknown choice {on_shutdown!r}; use leave or drain", field="--on-shutdown")
    check_positive(round_seconds, "--round")
    check_positive(poll_interval, "--poll-interval")
    if not 0 <= stop_grace < float("inf"):
        raise InputError(f"must be a finite number >= 0, got {stop_grace}", field="--stop-grace")
    check_positive(shutdown_timeout, "--shutdown-timeout")
    deadline = (
        shutdown_timeout if shutdown_timeout is not None else default_deadline(stop_grace, on_shutdown == "drain")
    )
    spec = load_cluster(cluster)
    pol = make_policy(policy, parse_policy_args(policy_arg))
    hand_replay(pol)  # auto and Lucid's tuner plan by simulating, live too
    directory = Path(state_dir(state))
    check_state_dir(directory)
    output_dir(directory, "--state")
    check_database(directory)
    check_port(host, port)
    exposure = exposure_warning(host)
    if exposure:
        err_console.print(exposure, highlight=False, soft_wrap=True)
    if job_user and job_uid_range:
        raise InputError("give --job-user or --job-uid-range, not both", field="--job-uid-range")
    run_as = resolve_job_user(job_user) or resolve_job_uid_range(job_uid_range)
    backend_obj = make_backend(backend, ray_address, spec)
    try:
        controller = Controller(
            directory,
            spec,
            pol,
            backend_obj,
            host=host,
            port=port,
            poll_interval=poll_interval,
            round_seconds=round_seconds,
            stop_grace=stop_grace,
            work_dir=work_dir,
            job_user=run_as,
            on_shutdown=on_shutdown,
        )
    except (sqlite3.Error, StateUnavailable) as exc:
        backend_obj.close()
        raise InputError(f"{directory / 'state.db'} cannot be used: {exc}", field="--state") from None
    except InputError:  # another controller holds the state directory
        backend_obj.close()
        raise
    # From here a signal stops the controller (before start, it finds the stop already asked).
    stopper = BoundedShutdown(controller._stop.set, deadline)
    stopper.install()
    try:
        controller.start(make_server)
    except OSError as exc:  # lost a race for the port between the check and the bind
        controller.shutdown()
        stopper.finished()
        raise InputError(f"cannot listen on {host}:{port}: {exc.strerror or exc}", field="--port") from None
    console.print(
        f"shapeshift controller on {controller.url} (policy {pol.name}, backend {backend}, "
        f"{spec.total_gpus} GPU slots on {len(spec.nodes)} nodes, state {directory}, jobs in {controller.work_dir})\n"
        f"dashboard: {controller.url}/dashboard (paste a token; the admin token is in {directory / 'token'})",
        highlight=False,
    )
    warning = root_warning(run_as)
    if warning:
        err_console.print(warning, highlight=False, soft_wrap=True)
    controller.wait()
    controller.shutdown()
    stopper.finished()
