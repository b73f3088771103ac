"""Planned ends by job: whether one is due, as a pass over them all would answer."""

from __future__ import annotations

import copy
import pickle

from shapeshift.policies.slurm.ends import EndsByJob
from shapeshift.policies.slurm.plan import Ending


def test_due_end_follows_removals_and_replacements():
    ends = EndsByJob()
    ends["a"] = Ending(100.0, ())
    ends["b"] = Ending(50.0, ())
    # b's end (50) is the first: due at 50, not at 49.
    assert not ends.any_by(49) and ends.any_by(50)
    # b finishes: a (100) is the first left.
    ends.pop("b")
    assert not ends.any_by(99) and ends.any_by(100)
    # a is given a later end (a requeued job's new run): its old 100 no longer counts.
    ends["a"] = Ending(200.0, ())
    assert not ends.any_by(150) and ends.any_by(200)
    assert not EndsByJob().any_by(1e18)


def test_a_copy_answers_as_the_original():
    ends = EndsByJob()
    ends["a"] = Ending(10.0, ())
    ends["b"] = Ending(5.0, ())
    del ends["b"]
    for other in (copy.deepcopy(ends), pickle.loads(pickle.dumps(ends))):
        assert dict(other) == {"a": Ending(10.0, ())}
        assert not other.any_by(9) and other.any_by(10)
