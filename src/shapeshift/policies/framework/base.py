"""The ``Policy`` contract, as seen from the policy package.

The contract is defined by the engine (``shapeshift.engine.contract``), which never
imports this package; it is re-exported here so that policy modules can name it next to
the parts they build on.
"""

from __future__ import annotations

from shapeshift.engine.contract import ARRIVAL, COMPLETION, EVENT_TRIGGERS, ROUND, Policy, PolicyError

__all__ = ["ARRIVAL", "COMPLETION", "EVENT_TRIGGERS", "ROUND", "Policy", "PolicyError"]
