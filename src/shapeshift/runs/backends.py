"""Where independent pieces of work run: local processes or a Ray cluster.

Two callers fan work out: ``simulate --workers N`` (one simulation per partition) and
``experiment run`` (one simulation per run). Both take ``--backend processes|ray``. The
pieces are independent and their results are merged by the caller in a fixed order, so
the backend changes only where the work runs, never what comes out.

Ray is an optional extra: :func:`check_backend` turns a missing package into one clear
input error before any work starts, and :func:`ray_map` joins ``RAY_ADDRESS`` when it is
set or starts a local Ray otherwise (no dashboard; Ray itself binds to loopback there).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Literal

from shapeshift.errors import InputError

Backend = Literal["processes", "ray"]


def check_backend(backend: str) -> None:
    """Refuse an unknown backend, or ``ray`` when the package is not installed."""
    if backend == "processes":
        return
    if backend != "ray":
        raise InputError(f"unknown backend {backend!r}; use processes or ray", field="--backend")
    try:
        import ray  # noqa: F401
    except ImportError:
        raise InputError(
            "--backend ray needs the 'ray' package, which is not installed; install it (pip install 'ray[default]') "
            "or use --backend processes",
            field="--backend",
        ) from None


def ensure_ray() -> Any:
    """The ``ray`` module, connected: to ``RAY_ADDRESS`` when set, else to a local Ray."""
    import ray

    if not ray.is_initialized():
        ray.init(
            address=os.environ.get("RAY_ADDRESS"),
            ignore_reinit_error=True,
            log_to_driver=False,
            include_dashboard=False,
        )
    return ray


def ray_map(fn: Callable[..., Any], calls: Iterable[tuple[Any, ...]], in_flight: int) -> Iterator[tuple[int, Any]]:
    """``(index, fn(*args))`` for each ``args`` of ``calls``, as they finish on Ray, with at
    most ``in_flight`` tasks submitted at once (one CPU each). The first tasks are
    submitted before this returns, so the caller's own work overlaps them; a task's error
    is raised in the caller as the results are read."""
    ray = ensure_ray()
    remote = ray.remote(num_cpus=1)(fn)
    todo = list(enumerate(calls))
    todo.reverse()  # pop() takes them in order
    pending: dict[Any, int] = {}

    def submit() -> None:
        while todo and len(pending) < max(1, in_flight):
            index, args = todo.pop()
            pending[remote.remote(*args)] = index

    def results() -> Iterator[tuple[int, Any]]:
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            ref = done[0]
            index = pending.pop(ref)
            submit()
            yield index, ray.get(ref)

    submit()
    return results()
