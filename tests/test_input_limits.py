"""The limits and readers the bad-input matrix leans on, checked at their edges: one job
cap everywhere, the cluster caps, multi-frame zstd, and the Python API's window."""

from __future__ import annotations

import pytest

import shapeshift as ss
from shapeshift.cluster import load_cluster
from shapeshift.cluster_limits import MAX_GPUS_PER_NODE, MAX_NODES, MAX_TOTAL_GPUS, check_cluster_size
from shapeshift.errors import InputError
from shapeshift.experiments.workloads import PhillyPoissonParams, PoissonParams
from shapeshift.workloads.readers import read_workload
from shapeshift.workloads.workload import MAX_JOBS


def test_one_job_cap_for_generate_experiments_and_the_api():
    from shapeshift.cli.workload_cmd import MAX_GENERATED_JOBS

    assert MAX_GENERATED_JOBS == MAX_JOBS  # `workload generate --jobs` is bounded by it
    for params in (PoissonParams, PhillyPoissonParams):
        assert params(jobs=MAX_JOBS).jobs == MAX_JOBS
        with pytest.raises(ValueError):
            params(jobs=MAX_JOBS + 1)
    from shapeshift.workloads.generators import poisson

    with pytest.raises(InputError, match="at most 10,000,000"):
        poisson(MAX_JOBS + 1, 6.0)


def test_cluster_caps_at_their_edges():
    check_cluster_size(MAX_NODES, 1)
    check_cluster_size(1, MAX_GPUS_PER_NODE)
    check_cluster_size(MAX_TOTAL_GPUS // MAX_GPUS_PER_NODE, MAX_GPUS_PER_NODE)  # 976 x 1024 <= 10^6
    for nodes, gpus, message in (
        (MAX_NODES + 1, 1, "100,000"),
        (1, MAX_GPUS_PER_NODE + 1, "1,024"),
        (977, MAX_GPUS_PER_NODE, "1,000,000"),  # 977 x 1024 = 1,000,448
    ):
        with pytest.raises(InputError, match=message):
            check_cluster_size(nodes, gpus)
    assert load_cluster("2x1024").total_gpus == 2048


def test_a_zstd_trace_of_two_frames_reads_whole(tmp_path):
    zstd = pytest.importorskip("zstandard")
    # Two frames concatenated (as `cat a.zst b.zst` makes): both rows are jobs.
    frames = zstd.ZstdCompressor().compress(b"job_id,submit_time,num_gpus,duration\n1,0,1,100\n")
    frames += zstd.ZstdCompressor().compress(b"2,5,2,50\n")
    path = tmp_path / "two.csv.zst"
    path.write_bytes(frames)
    workload = read_workload(path)
    assert [j.num_gpus for j in workload.jobs()] == [1, 2]


@pytest.mark.parametrize("window", ["abc", (1,), (0, True), (0.5, 2), None.__class__])
def test_a_malformed_window_is_an_input_error(window):
    with pytest.raises(InputError, match="window must be"):
        ss.simulate(window=window)
