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
* **Nothing blocks the control loop.** Every Ray call the controller makes returns at
  once: a placement group is waited for with ``ray.wait(timeout=0)`` on later polls (the
  actors start when it is ready), a rank's exit status is an outstanding call whose
  answer a later poll collects, and a signal is delivered in the background before the
  actors of a forgotten run are killed. A call unanswered for ``CALL_TIMEOUT`` seconds,
  or a placement not ready after ``PLACEMENT_TIMEOUT``, is a vanished rank; so is a
  rank on a node Ray declared dead, at the next poll.
* **Dead nodes are excluded.** A background thread reads ``ray.nodes()`` every second;
  ``dead_nodes`` names the Shapeshift nodes no live Ray node advertises, and the
  controller cordons them so no new run is placed there.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
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


#: Seconds between reads of Ray's node table (dead-node detection).
NODE_REFRESH = 1.0


@dataclass
class _RayRun:
    group: Any | None
    actors: list[Any | None] = field(default_factory=list)
    ranks: list[RankLaunch] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)
    ready: Any | None = None  # the placement group's ready() ref until the actors exist
    since: float = 0.0  # when the placement was asked for
    codes: list[int | None] = field(default_factory=list)  # last known exit codes
    calls: dict[int, tuple[Any, float]] = field(default_factory=dict)  # rank -> (poll ref, asked at)
    signals: list[Any] = field(default_factory=list)  # signal refs not yet answered


class RayBackend:
    """Runs ranks as Ray actors placed by placement groups (see the module docstring)."""

    name = "ray"

    def __init__(self, cluster: ClusterSpec, address: str = "auto") -> None:
        ray = _ray()
        self.cluster = cluster
        if not ray.is_initialized():
            ray.init(address=address, namespace=NAMESPACE, log_to_driver=False)
        self._runs: dict[RunId, _RayRun] = {}
        self._forgotten: list[tuple[_RayRun, float]] = []
        self._dead: set[str] = set()
        self._closing = threading.Event()
        self._watcher = threading.Thread(target=self._watch_nodes, name="shapeshift-ray-nodes", daemon=True)
        self._watcher.start()

    def spawn(self, run: RunId, ranks: list[RankLaunch]) -> None:
        from ray.util.placement_group import placement_group

        nodes = list(dict.fromkeys(r.node_name for r in ranks))
        slots = {name: sum(len(r.slots) for r in ranks if r.node_name == name) for name in nodes}
        bundles = [
            {node_resource(name): 0.001, **({SLOT_RESOURCE: slots[name]} if slots[name] else {})} for name in nodes
        ]
        group = placement_group(bundles, strategy="PACK", name=_group_name(run), lifetime="detached")
        self._runs[run] = _RayRun(
            group,
            ranks=list(ranks),
            nodes=nodes,
            ready=group.ready(),
            since=time.monotonic(),
            codes=[None] * len(ranks),
        )

    def _start_actors(self, run: RunId, state: _RayRun) -> None:
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        for rank in state.ranks:
            strategy = PlacementGroupSchedulingStrategy(
                state.group, placement_group_bundle_index=state.nodes.index(rank.node_name)
            )
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
        self._runs[run] = _RayRun(group, actors, ranks=list(ranks), codes=[None] * len(ranks))

    def poll(self, run: RunId) -> list[int | None]:
        """Never waits: collects answers that arrived, asks again, times out silent ranks."""
        ray = _ray()
        self._reap()
        state = self._runs.get(run)
        if state is None:
            return []
        now = time.monotonic()
        if state.ready is not None:
            done, _ = ray.wait([state.ready], timeout=0)
            if not done:
                if now - state.since > PLACEMENT_TIMEOUT or set(state.nodes) & self.dead_nodes():
                    state.ready = None
                    state.codes = [VANISHED] * len(state.ranks)  # the ranks never started
                return list(state.codes)
            state.ready = None
            try:
                ray.get(done[0], timeout=0)
            except Exception:  # the group was removed or cannot be placed
                state.codes = [VANISHED] * len(state.ranks)
                return list(state.codes)
            self._start_actors(run, state)
        if len(state.codes) < len(state.actors):
            state.codes = [None] * len(state.actors)
        dead = self.dead_nodes()
        for i, actor in enumerate(state.actors):
            if state.codes[i] is not None:
                continue
            # A rank whose node Ray declared dead cannot answer: it vanishes now, not
            # CALL_TIMEOUT seconds later (an answer that already arrived still counts).
            on_dead_node = i < len(state.ranks) and state.ranks[i].node_name in dead
            call = state.calls.get(i)
            if actor is None or (call is None and on_dead_node):
                state.codes[i] = VANISHED
                continue
            if call is None:
                state.calls[i] = (actor.poll.remote(), now)
                continue
            ref, asked = call
            done, _ = ray.wait([ref], timeout=0)
            if done:
                del state.calls[i]
                try:
                    state.codes[i] = ray.get(ref, timeout=0)
                except Exception:  # actor or node died: the rank is gone
                    state.codes[i] = VANISHED
            elif now - asked > CALL_TIMEOUT or on_dead_node:
                del state.calls[i]
                state.codes[i] = VANISHED
        return list(state.codes)

    def _signal(self, run: RunId, sig: int) -> None:
        state = self._runs.get(run)
        if state is None:
            return
        state.signals += [actor.signal.remote(sig) for actor in state.actors if actor is not None]

    def terminate(self, run: RunId) -> None:
        self._signal(run, signal.SIGTERM)

    def kill(self, run: RunId) -> None:
        self._signal(run, signal.SIGKILL)

    def forget(self, run: RunId) -> None:
        """Killed later (``_reap``), once the signals sent to its ranks were delivered: a
        process in its own session would outlive an actor killed before the signal."""
        state = self._runs.pop(run, None)
        if state is not None:
            self._forgotten.append((state, time.monotonic()))
        self._reap()

    def _reap(self) -> None:
        ray = _ray()
        from ray.util.placement_group import remove_placement_group

        keep = []
        for state, since in self._forgotten:
            pending = state.signals
            if pending:
                done, _ = ray.wait(pending, num_returns=len(pending), timeout=0)
                if len(done) < len(pending) and time.monotonic() - since < CALL_TIMEOUT:
                    keep.append((state, since))
                    continue
            for actor in state.actors:
                if actor is not None:
                    with contextlib.suppress(Exception):
                        ray.kill(actor)
            if state.group is not None:
                with contextlib.suppress(Exception):
                    remove_placement_group(state.group)
        self._forgotten = keep

    def dead_nodes(self) -> set[str]:
        """Shapeshift nodes that no live Ray node advertises (refreshed in the background)."""
        return self._dead

    def _watch_nodes(self) -> None:
        ray = _ray()
        names = [n.name for n in self.cluster.nodes]
        while not self._closing.wait(NODE_REFRESH):
            try:
                alive = [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]
            except Exception:  # Ray unreachable: leave the last answer in place
                continue
            self._dead = {name for name in names if not any(node_resource(name) in r for r in alive)}

    def close(self) -> None:
        """Disconnect from Ray; detached rank actors keep running for a restarted controller."""
        self._closing.set()
        self._watcher.join(timeout=5)
        deadline = time.monotonic() + CALL_TIMEOUT
        while self._forgotten and time.monotonic() < deadline:
            self._reap()
            time.sleep(0.05)
        self._runs.clear()
        with contextlib.suppress(Exception):
            _ray().shutdown()
