"""The ``Policy`` contract, as seen from the policy package, and what composable parts
declare about themselves.

The contract is defined by the engine (``shapeshift.engine.contract``), which never
imports this package; it is re-exported here so that policy modules can name it next to
the parts they build on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from shapeshift.engine.contract import (
    ARRIVAL,
    COMPLETION,
    DEFAULT_TRAITS,
    EVENT_TRIGGERS,
    ROUND,
    Adopts,
    Policy,
    PolicyError,
    PolicyTraits,
    Prepares,
    traits_of,
)

__all__ = [
    "ARRIVAL",
    "COMPLETION",
    "DEFAULT_TRAITS",
    "EVENT_TRIGGERS",
    "ROUND",
    "Adopts",
    "PartTraits",
    "Policy",
    "PolicyError",
    "PolicyTraits",
    "Prepares",
    "part_traits",
    "traits_of",
]


@dataclass(frozen=True)
class PartTraits:
    """What an admission or ordering part of a ``ComposedPolicy`` declares, as ``traits``.

    Each default is the reading that is always correct, only slower: a part that forgets
    a field is sorted at every decision and keeps the run serial, never decides wrongly."""

    #: Reads only the partition it is asked about (lets the composed policy be
    #: ``PolicyTraits.partition_local``).
    partition_local: bool = False
    #: Admission: admits every waiting job, in queue order (lets static keys use a heap).
    admits_all: bool = False
    #: Ordering: a waiting job's ``key(view, job_id)`` never changes while it waits, so the
    #: waiting jobs are kept in an incremental heap instead of being re-sorted.
    static_keys: bool = False


#: What a part that declares nothing gets.
DEFAULT_PART_TRAITS = PartTraits()


@runtime_checkable
class DeclaresPartTraits(Protocol):
    traits: PartTraits


def part_traits(part: object) -> PartTraits:
    """``part``'s declared traits, or the defaults where it declares none."""
    return part.traits if isinstance(part, DeclaresPartTraits) else DEFAULT_PART_TRAITS
