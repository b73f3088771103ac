"""Scheduling policies: one package per family, and the composable parts they share.

:mod:`.framework` holds the parts (admission, ordering, placement, evictions, queues,
rounds, estimators) and the registry that builds a policy by name; each other package is
one family of policies (``gavel``, ``tiresias``, ``themis``, ``size_based``, ``goodput``,
``auto``, ``planaware``, ``lucid``). Policies implement the engine's contract and never
import the simulator or a run path: a policy that plans by simulating is handed the
simulation (``shapeshift.engine.contract.Replay``).

``shapeshift.policies`` is both this package and, for notebook users, the function
``ss.policies()`` that lists the registry: importing any policy module makes Python bind
the package to the attribute ``shapeshift.policies``, so the package itself is made
callable and does what the function does.
"""

from __future__ import annotations

import sys
import types
from typing import Any


class _CallablePackage(types.ModuleType):
    def __call__(self) -> Any:
        """Every registered policy by name (as ``shapeshift.runs.facade.policies``)."""
        from shapeshift.policies.framework.registry import registry

        return dict(registry())


sys.modules[__name__].__class__ = _CallablePackage
