"""Ray backend: each run becomes a placement group, each rank a detached Ray actor.

Why this shape:

* **Placement groups pin the schedule.** The policy already chose nodes; Ray must not
  choose again. Every Ray node advertises a custom resource named after its Shapeshift
  node (``shapeshift_node_<name>``) and its GPU slots (``gpu_slot``); a run asks for one
  bundle per node of its placement, each needing that node's resource, so the bundles
  land exactly where the engine placed them.
* **Ranks are detached, named actors** (``shapeshift-<job>-<attempt>-<rank>`` in the
  ``shapeshift`` namespace). They outlive the controller's Ray connection, so a
  restarted controller re-adopts them by name, as the local backend re-adopts its
  processes.
* **The actor runs the same ``sh`` wrapper as the local backend**, which writes the
  command's exit status to a file on the rank's node; the actor reads it there, so no
  shared file system is needed to learn how a rank ended.
* **A dead node is a vanished rank.** If an actor cannot be reached (its node died),
  the rank reports ``VANISHED`` and the controller requeues the job from its checkpoint
  (bounded retries), exactly as for a crashed local process.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from shapeshift.errors import InputError
from shapeshift.model import ClusterSpec
from shapeshift.runtime.backends.base import VANISHED, RankLaunch, RunId
from shapeshift.runtime.backends.local import WRAPPER

NAMESPACE = "shapeshift"
SLOT_RESOURCE = "gpu_slot"
#: Seconds to wait for a placement group before treating the run's ranks as vanished.
PLACEMENT_TIMEOUT = 60.0
#: Seconds to wait for an actor's answer before treating its rank as vanished.
CALL_TIMEOUT = 30.0


def node_resource(node_name: str) -> str:
    """The custom resource a Ray node must advertise to host Shapeshift node ``node_name``."""
    return f"shapeshift_node_{node_name}"


def node_resources(cluster: ClusterSpec) -> dict[str, dict[str, float]]:
    """Per Shapeshift node, the resources to start its Ray node with (``ray start --resources``)."""
    return {n.name: {node_resource(n.name): 1000.0, SLOT_RESOURCE: float(n.gpus)} for n in cluster.nodes}


def _actor_name(run: RunId, rank: int) -> str:
    return f"shapeshift-{run[0]}-{run[1]}-{rank}"


def _group_name(run: RunId) -> str:
    return f"shapeshift-{run[0]}-{run[1]}"


class _RankProcess:
    """Body of the rank actor: one wrapped process on the actor's node."""

    def __init__(self, argv: list[str], env: dict[str, str], log: str, exit_file: str) -> None:
        self.exit_file = exit_file
        Path(log).parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(exit_file)
        with open(log, "ab") as handle:
            self.proc = subprocess.Popen(
                ["sh", "-c", WRAPPER, exit_file, *argv],
                stdin=subprocess.DEVNULL,
                stdout=handle,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
                cwd=env.get("SHAPESHIFT_WORKDIR") or None,
            )

    def _exit_code(self) -> int | None:
        try:
            return int(Path(self.exit_file).read_text().strip())
        except (OSError, ValueError):
            return None

    def poll(self) -> int | None:
        code = self._exit_code()
        if code is None and self.proc.poll() is not None:
            code = self._exit_code()
            return VANISHED if code is None else code
        return code

    def signal(self, sig: int) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, sig)


@cache
def _ray() -> Any:
    try:
        import ray
    except ModuleNotFoundError:
        raise InputError("the ray backend needs ray: pip install 'shapeshift[ray]'", field="--backend") from None
    return ray


@cache
def _rank_actor() -> Any:
    return _ray().remote(num_cpus=0)(_RankProcess)


@dataclass
class _RayRun:
    group: Any | None
    actors: list[Any | None] = field(default_factory=list)


class RayBackend:
    """Runs ranks as Ray actors placed by placement groups (see the module docstring)."""

    name = "ray"

    def __init__(self, cluster: ClusterSpec, address: str = "auto") -> None:
        ray = _ray()
        self.cluster = cluster
        if not ray.is_initialized():
            ray.init(address=address, namespace=NAMESPACE, log_to_driver=False)
        self._runs: dict[RunId, _RayRun] = {}

    def spawn(self, run: RunId, ranks: list[RankLaunch]) -> None:
        ray = _ray()
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        nodes = list(dict.fromkeys(r.node_name for r in ranks))
        slots = {name: sum(len(r.slots) for r in ranks if r.node_name == name) for name in nodes}
        bundles = [
            {node_resource(name): 0.001, **({SLOT_RESOURCE: slots[name]} if slots[name] else {})} for name in nodes
        ]
        group = placement_group(bundles, strategy="PACK", name=_group_name(run), lifetime="detached")
        state = self._runs[run] = _RayRun(group)
        try:
            ray.get(group.ready(), timeout=PLACEMENT_TIMEOUT)
        except Exception:  # the placement cannot be met (a node is gone): the ranks never start
            state.actors = [None] * len(ranks)
            return
        for rank in ranks:
            strategy = PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=nodes.index(rank.node_name))
            actor = _rank_actor().options(
                name=_actor_name(run, rank.rank),
                namespace=NAMESPACE,
                lifetime="detached",
                scheduling_strategy=strategy,
                resources={SLOT_RESOURCE: len(rank.slots)} if rank.slots else None,
            )
            state.actors.append(actor.remote(list(rank.argv), dict(rank.env), rank.log, rank.exit_file))

    def adopt(self, run: RunId, ranks: list[RankLaunch]) -> None:
        ray = _ray()
        from ray.util import get_placement_group

        actors: list[Any | None] = []
        for rank in ranks:
            try:
                actors.append(ray.get_actor(_actor_name(run, rank.rank), namespace=NAMESPACE))
            except ValueError:
                actors.append(None)
        try:
            group = get_placement_group(_group_name(run))
        except ValueError:
            group = None
        self._runs[run] = _RayRun(group, actors)

    def poll(self, run: RunId) -> list[int | None]:
        ray = _ray()
        state = self._runs.get(run)
        if state is None:
            return []
        codes: list[int | None] = []
        for actor in state.actors:
            if actor is None:
                codes.append(VANISHED)
                continue
            try:
                codes.append(ray.get(actor.poll.remote(), timeout=CALL_TIMEOUT))
            except Exception:  # actor or node died: the rank is gone
                codes.append(VANISHED)
        return codes

    def _signal(self, run: RunId, sig: int) -> None:
        # Waited for: ``forget`` kills the actors right after ``kill``, and a process in its
        # own session would outlive an actor that died before delivering the signal.
        ray = _ray()
        state = self._runs.get(run)
        pending = [actor.signal.remote(sig) for actor in (state.actors if state else []) if actor is not None]
        with contextlib.suppress(Exception):
            ray.get(pending, timeout=CALL_TIMEOUT)

    def terminate(self, run: RunId) -> None:
        self._signal(run, signal.SIGTERM)

    def kill(self, run: RunId) -> None:
        self._signal(run, signal.SIGKILL)

    def forget(self, run: RunId) -> None:
        ray = _ray()
        from ray.util.placement_group import remove_placement_group

        state = self._runs.pop(run, None)
        if state is None:
            return
        for actor in state.actors:
            if actor is not None:
                with contextlib.suppress(Exception):
                    ray.kill(actor)
        if state.group is not None:
            with contextlib.suppress(Exception):
                remove_placement_group(state.group)

    def close(self) -> None:
        """Disconnect from Ray; detached rank actors keep running for a restarted controller."""
        self._runs.clear()
        with contextlib.suppress(Exception):
            _ray().shutdown()
