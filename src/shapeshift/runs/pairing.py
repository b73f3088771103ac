"""Notes on a policy run under a speed model that cannot show what the policy decides.

Such a run is legitimate (it still measures queueing and GPU counts), but its numbers
answer a narrower question than the policy's paper asks: Sia under recorded durations
never gains from a larger batch, Rubick under recorded durations never gains from a
better plan. Each policy declares the speed models it needs in its registry entry
(``speed_models``, ``speed_note``); here a run is checked against that declaration, and
the front doors print the note (``simulate``, ``compare``) or issue a ``PairingWarning``
(``ss.simulate``, ``ss.compare``). It is never an error.
"""

from __future__ import annotations

from shapeshift.policies.framework.registry import policy_info
from shapeshift.runs.spec import RunSpec


class PairingWarning(UserWarning):
    """A policy runs under a speed model that cannot change what it optimises."""


def pairing_notes(spec: RunSpec) -> list[str]:
    """One line per mismatch between the policy and the run's throughput model."""
    info = policy_info(spec.policy)
    if not info.speed_models or spec.throughput.kind in info.speed_models:
        return []
    wanted = " or ".join(
        f"--throughput {kind}:DIR" if kind in ("ground-truth", "pollux") else f"--throughput {kind}"
        for kind in info.speed_models
    )
    return [
        f"note: {spec.policy} {info.speed_note} (throughput model {spec.throughput.kind!r}; "
        f"the policy's own effect needs {wanted})"
    ]
