"""Without a Ray cluster: the Ray backend's calls from the control loop
return at once, whatever a dead node does, and dead nodes are named. Ray itself is
replaced by a stand-in whose remote calls never answer (a node that died mid-call), so
a blocking ``ray.get`` would hang the test. The end-to-end version, with a real
two-node local Ray cluster, is ``test_ray_backend.py``."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from shapeshift.cluster import load_cluster
from shapeshift.runtime.backends import ray_backend as rb
from shapeshift.runtime.backends.base import VANISHED, RankLaunch


class _NeverAnswers:
    """A remote method whose result never arrives."""

    def remote(self, *args: object) -> object:
        return object()


class _FakeRay:
    def __init__(self) -> None:
        self.alive_resources = [{rb.node_resource("node000"): 1000.0}]
        self.blocking_calls = 0

    def is_initialized(self) -> bool:
        return True

    def wait(self, refs, num_returns=1, timeout=None):
        assert timeout == 0, "the control loop must never wait on Ray"
        return [], list(refs)

    def get(self, refs, timeout=None):
        self.blocking_calls += 1
        raise AssertionError("nothing is ready, so nothing may be fetched")

    def nodes(self):
        return [{"Alive": True, "Resources": r} for r in self.alive_resources]

    def kill(self, actor) -> None:
        return None


@pytest.fixture
def fake_ray(monkeypatch):
    fake = _FakeRay()
    monkeypatch.setattr(rb, "_ray", lambda: fake)
    monkeypatch.setattr(rb, "NODE_REFRESH", 0.02)
    monkeypatch.setattr(rb, "CALL_TIMEOUT", 0.3)
    return fake


def test_polling_a_silent_rank_never_blocks_and_it_vanishes_after_the_call_timeout(fake_ray):
    backend = rb.RayBackend(load_cluster("2x1"))
    try:
        actor = SimpleNamespace(poll=_NeverAnswers(), signal=_NeverAnswers())
        backend._runs[("1", 1)] = rb._RayRun(None, [actor], codes=[None])
        # every wait is ray.wait(timeout=0) (the stand-in asserts it) and nothing is fetched
        assert backend.poll(("1", 1)) == [None]  # asked
        assert backend.poll(("1", 1)) == [None]  # still waiting, not blocked
        backend.kill(("1", 1))  # queued, not waited for
        time.sleep(0.35)  # past the call timeout
        assert backend.poll(("1", 1)) == [VANISHED]
        assert fake_ray.blocking_calls == 0
    finally:
        backend.close()


def test_a_node_no_live_ray_node_advertises_is_reported_dead(fake_ray):
    backend = rb.RayBackend(load_cluster("2x1"))
    try:
        deadline = time.monotonic() + 5
        while backend.dead_nodes() != {"node001"} and time.monotonic() < deadline:
            time.sleep(0.02)
        assert backend.dead_nodes() == {"node001"}
        fake_ray.alive_resources.append({rb.node_resource("node001"): 1000.0})  # it came back
        deadline = time.monotonic() + 5
        while backend.dead_nodes() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert backend.dead_nodes() == set()
    finally:
        backend.close()


def test_a_rank_on_a_node_ray_declared_dead_vanishes_at_the_next_poll(fake_ray, monkeypatch):
    # Ray's node table lists only node000, so node001 is dead. Its rank's poll call can
    # never be answered: it vanishes at once, not after CALL_TIMEOUT (set to a minute
    # here); the silent rank on the live node000 is still waited for.
    monkeypatch.setattr(rb, "CALL_TIMEOUT", 60.0)
    backend = rb.RayBackend(load_cluster("2x1"))
    try:
        deadline = time.monotonic() + 5
        while backend.dead_nodes() != {"node001"} and time.monotonic() < deadline:
            time.sleep(0.02)
        ranks = [RankLaunch(r, r, f"node00{r}", ("true",), {}, "log", "exit") for r in (0, 1)]
        actors = [SimpleNamespace(poll=_NeverAnswers(), signal=_NeverAnswers()) for _ in ranks]
        backend._runs[("1", 1)] = rb._RayRun(None, actors, ranks=ranks, codes=[None, None])
        assert backend.poll(("1", 1)) == [None, VANISHED]
        assert backend.poll(("1", 1)) == [None, VANISHED]
        assert fake_ray.blocking_calls == 0
    finally:
        backend.close()
