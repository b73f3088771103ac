"""The CES control rule on hand-built cases, and its invariants on random demand."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shapeshift.energy.ces import CESConfig, CESController

CFG = CESConfig(buffer=2, history_bins=3, hold_bins=2, lookahead_bins=4, min_cut=1)


def warm(controller: CESController, demand: int, total: int, bins: int) -> None:
    for _ in range(bins):
        controller.step(demand, total, [float(demand)] * 4)


def test_wake_shortfall_plus_buffer_then_hold():
    c = CESController(CFG, powered=10)
    d = c.step(15, 30, [0.0] * 4)
    assert (d.powered, d.woken, d.shortage) == (17, 7, 5)
    # Demand collapses and the forecast says it stays low, but the hold lasts 2 bins.
    assert c.step(5, 30, [1.0] * 4).cut == 0
    assert c.step(5, 30, [1.0] * 4).cut == 0
    d = c.step(4, 30, [1.0] * 4)  # past drop (15 + 5 + 5) / 3 - 4 > 0, forecast drop 3 >= 0
    assert d.cut == 17 - (4 + 2) and d.powered == 6


def test_wake_is_capped_at_the_total():
    c = CESController(CFG, powered=5)
    assert c.step(9, 10, []).powered == 10


def test_power_down_to_forecast_plus_buffer():
    c = CESController(CFG, powered=20)
    warm(c, 10, 30, 3)
    d = c.step(8, 30, [5.0, 5.0, 5.0, 5.0, 100.0])  # only the first lookahead_bins (4) count
    # past drop 10 - 8 = 2 >= 0.1; forecast drop 8 - 5 = 3 >= 0; target max(8, 5) + 2 = 10.
    assert (d.powered, d.cut) == (10, 10)


def test_target_uses_forecast_when_thresholds_allow_a_rising_forecast():
    cfg = CESConfig(buffer=1, history_bins=1, hold_bins=0, lookahead_bins=2, forecast_drop=-10)
    c = CESController(cfg, powered=30)
    c.step(10, 30, [10.0, 10.0])
    d = c.step(8, 30, [11.0, 12.0])  # forecast mean 11.5 > demand: target ceil(11.5) + 1 = 13
    assert d.powered == 13


def test_no_power_down_when_forecast_rises_or_demand_did_not_fall():
    c = CESController(CFG, powered=20)
    warm(c, 10, 30, 3)
    assert c.step(8, 30, [9.0] * 4).cut == 0  # forecast 9 > demand 8
    c = CESController(CFG, powered=20)
    warm(c, 10, 30, 3)
    assert c.step(10, 30, [1.0] * 4).cut == 0  # past drop 0 < 0.1


def test_minimum_cut_and_max_cut():
    cfg = CESConfig(buffer=2, history_bins=1, hold_bins=0, lookahead_bins=1, min_cut=5)
    c = CESController(cfg, powered=14)
    c.step(12, 30, [12.0])
    assert c.step(10, 30, [10.0]).cut == 0  # target 12, cut 2 < 5
    c = CESController(CESConfig(buffer=0, history_bins=1, hold_bins=0, lookahead_bins=1), powered=20)
    c.step(12, 30, [12.0])
    d = c.step(10, 30, [10.0], max_cut=3)  # only 3 idle nodes may go
    assert (d.cut, d.powered) == (3, 17)


def test_energy_of_node_hours():
    assert CESConfig().kwh(10.0) == pytest.approx(10 * 0.8 * 3)  # facility = 3 x IT (Helios chapter)
    assert CESConfig(idle_node_watts=500, cooling_factor=1.5).kwh(4.0) == pytest.approx(3.0)
    with pytest.raises(ValueError):
        CESConfig(cooling_factor=0.5)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 60), min_size=1, max_size=80),
    st.lists(st.floats(0, 80, allow_nan=False), min_size=0, max_size=6),
    st.integers(0, 5),
)
def test_never_fewer_powered_than_requested(demands, forecast, buffer):
    total = 50
    c = CESController(CESConfig(buffer=buffer, history_bins=2, hold_bins=1, lookahead_bins=6), powered=total)
    for demand in demands:
        d = c.step(demand, total, forecast)
        assert min(demand, total) <= d.powered <= total
        assert d.woken == 0 or d.cut == 0
