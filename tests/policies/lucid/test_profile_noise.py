"""Lucid's profiler readings: exact by default (the artifact), seeded noise when named."""

from __future__ import annotations

import math

import pytest

from shapeshift.engine.overheads import Overheads
from shapeshift.errors import InputError
from shapeshift.model import ClusterSpec, JobSpec, NodeSpec
from shapeshift.perf.colocation import PROFILED, profile_of
from shapeshift.policies.framework.registry import make_policy
from shapeshift.policies.lucid.policy import Lucid, LucidParams
from shapeshift.policies.lucid.profiler import measure
from shapeshift.sim.simulator import simulate

DCGAN = JobSpec("dcgan-1", 0.0, 1, duration=1000.0, model="DCGAN")


def figures(profile) -> tuple[float, float, float]:  # type: ignore[no-untyped-def]
    return (profile.gpu_util, profile.mem_bw, profile.gpu_mem_gb)


def test_without_noise_the_profiler_reads_the_profile_itself():
    # The artifact's profiler and scorer read the same measured figures of a
    # configuration, so the reading is the catalog's DCGAN profile (a job whose model is
    # a profiled model's name has that profile), figure for figure: utilisation 0.622,
    # bandwidth 0.256, 2.6 GB.
    assert figures(measure(DCGAN, seed=0)) == figures(PROFILED["DCGAN"]) == (0.622, 0.256, 2.6)
    assert figures(measure(DCGAN, seed=0, noise=0.0)) == figures(profile_of(DCGAN, 0))


def test_noisy_readings_are_seeded_and_within_the_stated_bound():
    # Each figure is multiplied by 1 + U(-0.05, 0.05): DCGAN's utilisation lies in
    # [0.622 x 0.95, 0.622 x 1.05] = [0.5909, 0.6531], its bandwidth in [0.2432, 0.2688],
    # its memory in [2.47, 2.73] GB; a continuous draw equals the profile with
    # probability 0, so every figure differs from it.
    read = figures(measure(DCGAN, seed=0, noise=0.05))
    for got, exact in zip(read, figures(PROFILED["DCGAN"]), strict=True):
        assert got != exact and exact * 0.95 <= got <= exact * 1.05
    assert figures(measure(DCGAN, seed=0, noise=0.05)) == read  # same seed, same reading
    assert figures(measure(DCGAN, seed=1, noise=0.05)) != read  # another seed, another


def test_policy_features_are_exact_by_default_and_noisy_when_named():
    # One profiler node and one main node; profile_before_queue sends the 1,000 s job
    # through the profiler (T_prof 200 s) and it leaves with its measured features.
    cluster = ClusterSpec(tuple(NodeSpec(f"n{i}", 1, 8, 64, gpu_mem_gb=24.0) for i in range(2)), gpu_share_limit=2)
    read = {}
    for noise in (0.0, 0.05):
        policy = Lucid(LucidParams(profile_before_queue=True, profile_noise=noise))
        simulate([DCGAN], cluster, policy, overheads=Overheads(0.0, 0.0))
        read[noise] = figures(policy.features["dcgan-1"])
    assert read[0.0] == (0.622, 0.256, 2.6)
    assert read[0.05] == figures(measure(DCGAN, seed=0, noise=0.05)) != read[0.0]


@pytest.mark.parametrize("value", [math.nan, math.inf, -0.01, 1.0])
def test_profile_noise_outside_zero_to_one_is_refused_by_name(value):
    with pytest.raises(InputError, match="profile_noise"):
        make_policy("lucid", {"profile_noise": value})
