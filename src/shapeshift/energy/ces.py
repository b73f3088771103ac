"""CES, the Helios cluster-energy-saving control loop: how many nodes to keep powered.

GPU clusters idle part of the day (the diurnal pattern of submissions) yet keep every
node powered. Helios (Hu et al., SC'21, Sec. 5) powers down idle nodes when demand is
falling and is forecast to stay low, and wakes nodes back as soon as requests exceed
what is powered. This module is the decision rule only, one call per time bin; the
replay (``replay.py``) and the in-simulation component (``sim_component.py``) feed it
demand and forecasts. Every parameter of the rule lives in ``CESConfig``.

The rule, evaluated every bin (default 10 minutes) with ``demand`` = nodes requested
now (busy nodes plus nodes queued jobs need) and ``powered`` = nodes powered so far:

1. *Wake*: if ``demand > powered``, power ``demand + buffer`` nodes (at most the total);
   then *hold*: no power-down for the next ``hold_bins`` bins.
2. *Power down*, only when not holding and all of:
   the past drop ``mean(demand over the previous history_bins bins) - demand`` is at
   least ``history_drop``; the forecast drop ``demand - mean(forecast over the next
   lookahead_bins bins)`` is at least ``forecast_drop``; and the cut
   ``powered - target`` is at least ``min_cut`` nodes, where the target is
   ``max(demand, ceil(mean forecast)) + buffer`` (forecast demand plus the buffer
   sigma, never below what is requested now).

Defaults follow the Helios artifact (buffer 20 nodes, hold 10 bins, minimum cut 1 node,
forecast threshold 0), with the past window set to one hour (6 bins) and the lookahead
to 3 hours (18 bins). Energy: an idle powered node draws ``idle_node_watts`` (800 W) and
each watt of IT load costs ``cooling_factor`` (2x) watts at the facility.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class CESConfig:
    """Parameters of the CES control loop and of the energy accounting (defaults stated)."""

    #: Control period and forecast resolution (s). Default 600 (10 minutes).
    bin_seconds: float = 600.0
    #: Spare nodes kept powered above demand, the buffer "sigma" (nodes). Default 20.
    buffer: int = 20
    #: Past window for the drop test (bins). Default 6 (one hour).
    history_bins: int = 6
    #: Minimum past-hour drop, mean(previous demand) - demand (nodes). Default 0.1.
    history_drop: float = 0.1
    #: Forecast window for the drop test (bins). Default 18 (three hours).
    lookahead_bins: int = 18
    #: Minimum forecast drop, demand - mean(forecast) (nodes). Default 0 (not rising).
    forecast_drop: float = 0.0
    #: Smallest power-down worth doing (nodes). Default 1.
    min_cut: int = 1
    #: Bins without any power-down after a wake-up. Default 10 (100 minutes).
    hold_bins: int = 10
    #: Seconds from waking a node until it can take jobs (simulation only). Default 300.
    boot_delay: float = 300.0
    #: Power of an idle, powered node (W). Default 800.
    idle_node_watts: float = 800.0
    #: Facility watts per IT watt (cooling and power delivery). Default 3: the Helios
    #: chapter counts cooling as twice the servers' energy (its 1.65 GWh saved on Philly
    #: works out only with 3x).
    cooling_factor: float = 3.0

    def __post_init__(self) -> None:
        checks = (
            (self.bin_seconds > 0, "bin_seconds must be > 0"),
            (self.buffer >= 0, "buffer must be >= 0"),
            (self.history_bins >= 1, "history_bins must be >= 1"),
            (self.lookahead_bins >= 1, "lookahead_bins must be >= 1"),
            (self.min_cut >= 1, "min_cut must be >= 1"),
            (self.hold_bins >= 0, "hold_bins must be >= 0"),
            (self.boot_delay >= 0, "boot_delay must be >= 0"),
            (self.idle_node_watts >= 0, "idle_node_watts must be >= 0"),
            (self.cooling_factor >= 1, "cooling_factor must be >= 1"),
        )
        for ok, message in checks:
            if not ok:
                raise ValueError(f"CES: {message}")

    def kwh(self, node_hours: float) -> float:
        """Facility energy of ``node_hours`` idle node-hours (kWh), cooling included."""
        return node_hours * self.idle_node_watts / 1000.0 * self.cooling_factor

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Decision:
    """What one control step did. ``powered`` is the count after the step."""

    powered: int
    woken: int = 0
    cut: int = 0
    #: Requested nodes that were not powered at the start of the bin (they wait for a boot).
    shortage: int = 0


class CESController:
    """The CES rule with its state (powered count, past demand, hold counter)."""

    def __init__(self, config: CESConfig, powered: int):
        self.config = config
        self.powered = int(powered)
        self._history: deque[float] = deque(maxlen=config.history_bins)
        self._hold = 0

    @property
    def holding(self) -> bool:
        return self._hold > 0

    def wake_for(self, demand: int, total: int) -> int:
        """Between bins, a job arrived (Helios Algorithm 2's arrival check): when the
        requested nodes exceed the powered ones, power up the shortfall plus the buffer now
        and hold. Returns the nodes woken."""
        demand = min(max(int(demand), 0), total)
        if demand <= self.powered:
            return 0
        before = self.powered
        self.powered = min(total, demand + self.config.buffer)
        self._hold = self.config.hold_bins
        return self.powered - before

    def step(
        self,
        demand: int,
        total: int,
        forecast: Sequence[float] | Callable[[], Sequence[float]],
        max_cut: int | None = None,
    ) -> Decision:
        """One bin: ``demand`` requested nodes, ``total`` nodes that exist, ``forecast`` the
        predicted demand of the next bins (only the first ``lookahead_bins`` are used; a
        callable is only called when the power-down test needs it).
        ``max_cut`` bounds a power-down (the simulator can only power down idle nodes)."""
        cfg = self.config
        demand = min(max(int(demand), 0), total)
        before = min(self.powered, total)
        powered, woken, cut = before, 0, 0
        shortage = max(demand - before, 0)
        if shortage > 0:
            powered = min(total, demand + cfg.buffer)
            woken = powered - before
            self._hold = cfg.hold_bins
        elif self._hold > 0:
            self._hold -= 1
        elif len(self._history) >= cfg.history_bins:
            past_drop = sum(self._history) / len(self._history) - demand
            if past_drop >= cfg.history_drop:
                values = forecast() if callable(forecast) else forecast
                window = [float(f) for f in values[: cfg.lookahead_bins] if math.isfinite(f)]
                predicted = sum(window) / len(window) if window else math.inf
                if demand - predicted >= cfg.forecast_drop:
                    target = min(total, max(demand, math.ceil(predicted - 1e-9)) + cfg.buffer)
                    cut = before - target
                    if max_cut is not None:
                        cut = min(cut, max_cut)
                    if cut >= cfg.min_cut:
                        powered = before - cut
                    else:
                        cut = 0
        self._history.append(float(demand))
        self.powered = powered
        return Decision(powered=powered, woken=woken, cut=cut, shortage=shortage)
