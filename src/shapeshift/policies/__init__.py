"""Scheduling policies: the composable parts (admission, ordering, placement), one module
per policy, and the registry that builds them by name.

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
        """Every registered policy by name (see ``shapeshift.runs.facade.policies``)."""
        from shapeshift.runs.facade import policies

        return policies()


sys.modules[__name__].__class__ = _CallablePackage
