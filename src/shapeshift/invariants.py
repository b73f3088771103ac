"""The error every domain type raises when a value breaks one of its invariants.

Its own module so that ``shapeshift.model`` and the job-kind types it re-exports
(``shapeshift.job_kinds``) share it without importing each other.
"""

from __future__ import annotations


class ModelError(ValueError):
    """A domain value violates one of its invariants."""


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ModelError(message)
