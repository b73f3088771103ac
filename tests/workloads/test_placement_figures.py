"""Spread-placement slowdowns read from Gavel's measured throughput table, and the rules
for what it does not cover (``shapeshift.workloads.placement_figures``)."""

from __future__ import annotations

import math

import pytest

from shapeshift.workloads.catalog import get_model
from shapeshift.workloads.placement_figures import MEASURED, spread_slowdown


def test_a_measured_model_slows_by_gavels_consolidated_over_unconsolidated_ratio():
    # Gavel's simulation_throughputs.json, LM at batch 20 on 4 P100s: 93.815 steps/s on one
    # server, 40.939 spread over servers -> 2.2916x slower spread.
    assert MEASURED["lstm"]["P100"][4] == (93.815, 40.939)
    assert spread_slowdown("lstm", "P100", 4) == pytest.approx(93.815 / 40.939)
    # The catalog answers the same through the model entry, and names its source.
    assert get_model("lstm").spread_slowdown("P100", 4) == pytest.approx(2.2916, abs=1e-4)
    assert "simulation_throughputs.json" in get_model("lstm").source["spread_slowdown"]


def test_counts_between_measurements_take_the_largest_measured_count_below():
    # 6 GPUs -> the 4-GPU figure; 16 -> the 8-GPU figure; 1 GPU never slows.
    assert spread_slowdown("transformer", "V100", 6) == pytest.approx(19.66 / 10.57)
    assert spread_slowdown("transformer", "V100", 16) == pytest.approx(49.651 / 17.01)
    assert spread_slowdown("transformer", "V100", 1) == 1.0


def test_a_spread_run_measured_faster_counts_as_no_slowdown():
    # ResNet-50 at batch 64 on 4 V100s: 9.452 consolidated, 11.136 spread (ratio 0.85).
    assert spread_slowdown("resnet50", "V100", 4) == 1.0


def test_an_unmeasured_type_uses_the_v100_figures():
    # Gavel has no multi-GPU ResNet-50 figures on K80s; A100 is not in the table at all.
    assert spread_slowdown("resnet50", "K80", 2) == pytest.approx(7.922 / 6.866)
    assert spread_slowdown("lstm", "A100", 2) == pytest.approx(132.174 / 30.437)


def test_unmeasured_models_use_the_stated_proxy_or_do_not_slow():
    # VGG-16 (Tiresias-sensitive, not measured by Gavel): geometric mean of Transformer
    # (15.876 / 7.005) and LM (132.174 / 30.437) on 2 V100s = sqrt(2.2664 * 4.3425) = 3.137.
    expected = math.sqrt((15.876 / 7.005) * (132.174 / 30.437))
    assert spread_slowdown("vgg16", "V100", 2) == pytest.approx(expected)
    assert expected == pytest.approx(3.137, abs=1e-3)
    assert "proxy" in get_model("vgg16").source["spread_slowdown"]
    # Inception-3: neither measured nor flagged, so no slowdown and no source entry.
    assert spread_slowdown("inception3", "V100", 8) == 1.0
    assert "spread_slowdown" not in get_model("inception3").source
