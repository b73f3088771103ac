"""Every classic policy is registered under its name."""

from __future__ import annotations

from shapeshift.policies.framework.registry import make_policy


def test_every_new_policy_is_registered_with_a_description():
    for name in ("sjf", "srtf", "las", "tiresias", "themis", "gavel", "optimus"):
        policy = make_policy(name)
        assert policy.name == name

