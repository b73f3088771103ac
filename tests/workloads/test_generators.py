"""Generators: seeded, round-trip exactly, and follow the fitted distribution."""

from __future__ import annotations

import importlib.util
import json
import math
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from shapeshift.errors import InputError
from shapeshift.workloads.generators import Bursts, SizeDuration, burst_arrivals, bursty, philly_fit, poisson
from shapeshift.workloads.readers import read_workload
from tests.conftest import bundled

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _toy() -> SizeDuration:
    """1 GPU (75%): ln d quantiles ln10, ln100, ln1000 at 0, .5, 1; 4 GPUs (25%): always 50 s."""
    return SizeDuration.from_dict(
        {
            "sizes": {"gpus": [1, 4], "probabilities": [0.75, 0.25]},
            "quantile_levels": [0.0, 0.5, 1.0],
            "duration_groups": [
                {"gpus": [1], "log_quantiles": [math.log(10), math.log(100), math.log(1000)]},
                {"gpus": [4], "log_quantiles": [math.log(50)] * 3},
            ],
        }
    )


def test_quantile_function_interpolates_log_durations():
    dist = _toy()
    got = dist.durations(np.array([1, 1, 1, 4]), np.array([0.0, 0.25, 0.75, 0.9]))
    # u = .25 lies halfway between ln10 and ln100: exp(ln 10^1.5) = 31.62
    assert got == pytest.approx([10.0, 10**1.5, 10**2.5, 50.0])


@pytest.mark.parametrize("make", [poisson, bursty])
def test_generators_are_seeded(make):
    a = make(300, 10.0, seed=4).frame
    pd.testing.assert_frame_equal(a, make(300, 10.0, seed=4).frame)
    assert not a.equals(make(300, 10.0, seed=5).frame)


@pytest.mark.parametrize("make", [poisson, bursty])
@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_generate_write_read_gives_the_same_table(tmp_path, make, suffix):
    original = make(500, 7.0, seed=2, models=("resnet50", "bert", "gpt2"), assignment="size-aware")
    path = tmp_path / f"w{suffix}"
    original.write(path)
    again = read_workload(path)
    pd.testing.assert_frame_equal(again.frame, original.frame)
    assert again.jobs() == original.jobs()


def test_poisson_rate_sizes_and_durations_follow_the_fit():
    n = 20000
    frame = poisson(n, 30.0, seed=0).frame
    gaps = np.diff(frame["submit_time"].to_numpy())
    assert frame["submit_time"].iloc[0] == 0.0
    assert gaps.mean() == pytest.approx(120.0, rel=0.03)  # 3600 / 30; sd of the mean ~0.7 %
    fit = json.loads(resources.files("shapeshift").joinpath("data/philly_fit.json").read_text())
    p1 = fit["sizes"]["probabilities"][fit["sizes"]["gpus"].index(1)]
    assert (frame["num_gpus"] == 1).mean() == pytest.approx(p1, abs=0.01)
    median_1gpu = fit["duration_groups"][0]["median_s"]
    assert frame.loc[frame["num_gpus"] == 1, "duration"].median() == pytest.approx(median_1gpu, rel=0.1)


def test_max_gpus_conditions_the_size_distribution():
    frame = poisson(2000, 10.0, seed=1, max_gpus=8).frame
    assert frame["num_gpus"].max() <= 8 and set(frame["num_gpus"]) <= {1, 2, 4, 8}
    with pytest.raises(InputError, match="fits in 0 GPUs"):
        poisson(10, 10.0, max_gpus=0)


def test_burst_arrivals_hand_computed():
    # base 1 job/h, bursts of 2 h at 3x every 10 h: 6 expected arrivals in a burst, 14 a period
    bursts = Bursts(period=10.0, length=2.0, factor=3.0)
    times, in_burst = burst_arrivals(np.array([0.0, 3.0, 6.0, 13.0, 14.0, 20.5]), 1.0, bursts)
    assert (times / 3600).tolist() == pytest.approx([0.0, 1.0, 2.0, 9.0, 10.0, 12.5])
    assert in_burst.tolist() == [True, True, False, False, True, False]


def test_bursty_jobs_are_short_and_concentrated_in_bursts():
    bursts = Bursts(period=24.0, length=2.0, factor=6.0, short_quantile=0.3)
    frame = bursty(6000, 5.0, bursts, seed=3, distribution=_toy()).frame
    hour = (frame["submit_time"] / 3600.0) % 24.0
    in_burst = (hour < 2.0).to_numpy()
    # expected share of arrivals in bursts: 6 x 5 x 2 / (60 + 5 x 22) = 60 / 170
    assert in_burst.mean() == pytest.approx(60 / 170, abs=0.03)
    one_gpu = (frame["num_gpus"] == 1).to_numpy()
    # burst jobs of 1 GPU draw below the 0.3 quantile: at most exp(ln10 + 0.6 (ln100 - ln10)) = 39.8 s
    assert frame.loc[in_burst & one_gpu, "duration"].max() <= 39.9
    assert frame.loc[~in_burst & one_gpu, "duration"].max() > 100.0


def test_model_assignment_uniform_and_size_aware():
    models = ("small", "medium", "large")
    uniform = poisson(3000, 10.0, seed=0, models=models).frame
    counts = uniform["model"].value_counts()
    assert set(counts.index) == set(models) and counts.min() > 900
    aware = poisson(3000, 10.0, seed=0, models=models, assignment="size-aware").frame
    gpu_hours = aware["num_gpus"] * aware["duration"]
    bands = [gpu_hours[aware["model"] == m] for m in models]
    assert [len(b) for b in bands] == [1000, 1000, 1000]
    assert bands[0].max() <= bands[1].min() and bands[1].max() <= bands[2].min()
    assert poisson(10, 1.0).frame["model"].eq("").all()


@pytest.mark.parametrize(
    ("call", "fragment"),
    [
        (lambda: poisson(-1, 1.0), "jobs must be >= 0"),
        (lambda: poisson(10, 0.0), "rate must be > 0"),
        (lambda: poisson(10, 1.0, models=("a",), assignment="random"), "unknown model assignment"),
        (lambda: Bursts(period=2.0, length=3.0), "burst length"),
        (lambda: Bursts(factor=0.5), "burst factor"),
        (lambda: Bursts(short_quantile=0.0), "short quantile"),
    ],
)
def test_bad_parameters_are_input_errors(call, fragment):
    with pytest.raises(InputError, match=fragment):
        call()


def test_fit_is_reproducible_from_the_script():
    trace = bundled("philly")
    committed = json.loads(resources.files("shapeshift").joinpath("data/philly_fit.json").read_text())
    assert json.loads(json.dumps(_script("fit_philly_distribution").fit(trace))) == committed
    assert committed["source"]["script"] == "scripts/fit_philly_distribution.py"
    assert philly_fit().sizes.tolist() == committed["sizes"]["gpus"]


def test_pollux_reference_is_reproducible_from_the_script():
    profiles = bundled("pollux-profiles")
    committed = json.loads(resources.files("shapeshift").joinpath("data/pollux_reference.json").read_text())
    assert json.loads(json.dumps(_script("derive_pollux_reference").derive(profiles))) == committed
