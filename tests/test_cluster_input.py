"""Cluster input: the NxG shorthand, the YAML format and its error messages."""

from __future__ import annotations

import pytest

from shapeshift.cluster import load_cluster, parse_bandwidth
from shapeshift.errors import InputError
from tests.conftest import bundled, shared_file


def test_shorthand_defaults():
    cluster = load_cluster("3x8")
    assert len(cluster.nodes) == 3 and cluster.total_gpus == 24
    assert cluster.nodes[0].cpus == 64 and cluster.nodes[0].mem_gb == 512


@pytest.mark.parametrize(
    ("text", "gb_s"),
    [("400 GB/s", 400.0), ("100 Gb/s", 12.5), ("64GB/s", 64.0), ("10 Gbps", 1.25), ("1.6 TB/s", 1600.0)],
)
def test_bandwidth_units(text, gb_s):
    assert parse_bandwidth(text) == pytest.approx(gb_s)


@pytest.mark.parametrize("value", [100, 12.5, "100", "fast"])
def test_bandwidth_without_units_is_refused(value):
    with pytest.raises(ValueError, match=r"unit|GB/s"):
        parse_bandwidth(value)


def test_example_files_load():
    philly = load_cluster(bundled("philly-vcs"))
    assert philly.total_gpus == 352 * 8 and len(philly.partitions) == 11
    assert len(philly.partitions["6214e9"]) == 64
    a800 = load_cluster(bundled("rubick-a800"))
    assert a800.nodes[0].inter_bw_gb_s == pytest.approx(12.5) and dict(a800.tenants) == {"A": 64, "B": 0}


def test_shared_heterogeneous_example_loads():
    # ../shared/examples is beside the project checkout only: skipped with its reason
    # where it is absent (a clone elsewhere), as every test of unbundled data is.
    hetero = load_cluster(shared_file("examples/cluster-heterogeneous.yaml"))
    assert hetero.gpu_types == ("K80", "P100", "V100")


def _write(tmp_path, text):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    return path


def test_bare_bandwidth_error_names_file_key_and_line(tmp_path):
    path = _write(tmp_path, "nodes:\n  - count: 2\n    gpus: 8\n    inter_node_bandwidth: 100\n")
    with pytest.raises(InputError) as err:
        load_cluster(path)
    message = str(err.value)
    assert str(path) in message and ":4" in message
    assert "nodes.0.inter_node_bandwidth" in message and "unit" in message


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("nodes: []\n", "nodes"),
        ("nodes:\n  - gpus: -1\n", "nodes.0.gpus"),
        ("nodes:\n  - gpus: 8\n    colour: red\n", "colour"),
        ("nodes:\n  - gpus: 8\npartitions:\n  a: 3\n", "more nodes"),
        ("nodes:\n  - gpus: 8\npartitions:\n  a: [nope]\n", "unknown node"),
        ("nodes: [\n", "not valid YAML"),
        ("- 1\n", "mapping"),
    ],
)
def test_bad_cluster_files(tmp_path, text, fragment):
    with pytest.raises(InputError, match=fragment):
        load_cluster(_write(tmp_path, text))


def test_missing_or_unrecognised_cluster(tmp_path):
    with pytest.raises(InputError, match="not found"):
        load_cluster(tmp_path / "missing.yaml")
    with pytest.raises(InputError, match="NxG"):
        load_cluster("eight-by-eight")
