"""The live queue's reason carries a primo estimate and its top contributions (``queue --explain``)."""

from __future__ import annotations

import pytest

pytest.importorskip("interpret")

from shapeshift.cli.queue_cmd import _reason
from shapeshift.policies.framework.composed import AcceptAll, ComposedPolicy
from shapeshift.policies.framework.placement import Consolidated
from shapeshift.policies.size_based.qssf import QssfOrdering
from shapeshift.predict.primo_duration import EXPLAIN_SEPARATOR, PrimoEstimator, with_explanation
from tests.predict.test_estimators import _two_kinds, status


def test_reason_gains_the_estimate_and_queue_shows_it_only_when_asked():
    estimator = PrimoEstimator(model="prdt", min_train=30)
    for s in _two_kinds(30):
        estimator.observe(s)
    policy = ComposedPolicy("qssf", AcceptAll(), QssfOrdering(estimator), Consolidated())
    assert with_explanation("needs 8 GPUs", policy, "q") == "needs 8 GPUs"  # not estimated yet
    estimator.estimate(status("q", 5000, 1, 1.0, user="b"))
    reason = with_explanation("needs 8 GPUs", policy, "q")
    # The tree splits the users apart, so user b's estimate is their 10,000 s = 2.8 h.
    assert reason.startswith(f"needs 8 GPUs{EXPLAIN_SEPARATOR}2.8 h: user=b x")
    assert _reason(reason, explain=False) == "needs 8 GPUs"
    assert _reason(reason, explain=True) == reason
