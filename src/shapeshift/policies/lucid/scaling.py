"""Lucid's time-aware profiler scaling: one main node lent to the profiler under load.

The Lucid artifact (``simulation/profiler/lgf.py``, step 3 "Time-aware Scaling",
enabled for its Venus cluster only) grows the profiling cluster by one node when more
than 10 jobs wait for it, and gives the node back when fewer than 5 wait, the extra node
is idle, and the workload forecaster predicts at most ``5 x profiler_max_gpus`` for the
next bins (``check_future_cluster_throughput``; no forecast yet counts as low). The
artifact checks every 10 s (growth) and 100 s (shrinking) of its ticking clock; we
check at every decision, which happens at each arrival and completion (the engine is
event-driven). The artifact adds a node from outside its VCs; our engine keeps each job
in its VC, so the node comes from the VC's own main nodes, and only an idle one (no job
holds a GPU there) may move. These two adaptations are noted in the README's
fidelity table; ``LucidParams.profiler_scaling`` switches the whole rule on.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from shapeshift.engine.state import FreeResources

#: lgf.py: grow when more than this many jobs wait for the profiler...
GROW_ABOVE = 10
#: ...and shrink when fewer than this many wait.
SHRINK_BELOW = 5
#: lgf.py ``node_scaling_num``: nodes lent at a time (and at most).
LENT_NODES = 1
#: lgf.py: shrink only if the forecast is at most this many times the profiler's job limit.
FORECAST_FACTOR = 5


def idle(node: int, free: FreeResources) -> bool:
    """Whether no job holds a GPU on ``node``."""
    capacity = free.gpu_capacity[node]
    return bool(free.gpus[node] == capacity and capacity > 0)


@dataclass
class ProfilerScaler:
    """Per partition, the main nodes lent to the profiler (see the module docstring)."""

    max_gpus: int
    lent: dict[str, list[int]] = field(default_factory=dict)
    grown: int = 0
    shrunk: int = 0

    def adjust(
        self,
        partition: str,
        base: tuple[np.ndarray, np.ndarray],
        waiting: int,
        free: FreeResources,
        forecast: float | None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The (profiler, main) split of ``partition`` after this decision's scaling."""
        lent = self.lent.setdefault(partition, [])
        profiler, main = base
        if not lent and waiting > GROW_ABOVE and len(profiler):
            spare = [int(n) for n in main if idle(int(n), free)]
            if len(spare) > LENT_NODES:  # keep at least one main node
                lent.extend(spare[:LENT_NODES])
                self.grown += 1
        elif lent and waiting < SHRINK_BELOW and all(idle(n, free) for n in lent):
            low = forecast is None or forecast <= FORECAST_FACTOR * self.max_gpus
            if low:
                lent.clear()
                self.shrunk += 1
        if not lent:
            return base
        moved = np.array(lent, dtype=main.dtype)
        return np.concatenate([profiler, moved]), main[~np.isin(main, moved)]
