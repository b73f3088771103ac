"""The garbage collector's settings while a run lasts, and after it."""

from __future__ import annotations

import gc

import pytest

from shapeshift.policies.framework.registry import make_policy
from shapeshift.sim.simulator import YOUNG_COLLECTION
from tests.conftest import job, run


class _Watching:
    """Forwards to FIFO and notes the collector's thresholds at each decision (or fails)."""

    def __init__(self, fail: bool = False) -> None:
        self.inner = make_policy("fifo", {})
        self.seen: list[tuple[int, ...]] = []
        self.fail = fail

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def decide(self, view):
        self.seen.append(gc.get_threshold())
        if self.fail:
            raise RuntimeError("a policy's own error")
        return self.inner.decide(view)


@pytest.fixture
def thresholds():
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)  # Python's defaults, whatever the session set
    yield
    gc.set_threshold(*before)


def test_the_youngest_generation_is_collected_less_often_during_a_run_only(thresholds):
    policy = _Watching()
    run([job("a", 0, 1, 10), job("b", 5, 1, 10)], "1x1", policy=policy)
    # Every decision saw the run's threshold for the youngest generation and the
    # defaults for the older two; afterwards the defaults are back.
    assert policy.seen and set(policy.seen) == {(YOUNG_COLLECTION, 10, 10)}
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_freeze_count() == 0


def test_the_settings_come_back_when_a_run_fails(thresholds):
    with pytest.raises(RuntimeError, match="own error"):
        run([job("a", 0, 1, 10)], "1x1", policy=_Watching(fail=True))
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_freeze_count() == 0
