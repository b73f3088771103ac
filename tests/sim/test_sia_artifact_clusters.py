"""The Sia artifact's clusters as shipped under ``docs/data/sia-artifact/``."""

from pathlib import Path

from shapeshift.cluster import load_cluster

DATA = Path(__file__).resolve().parents[2] / "docs" / "data" / "sia-artifact"


def test_the_homogeneous_cluster_is_sixteen_four_gpu_aws_nodes() -> None:
    # sia-simulator/simulator_config.py: cluster_nnodes = {"aws": 16} and
    # cluster_ngpus_per_node["aws"] = 4, so 16 nodes x 4 GPUs = 64 GPUs, every one typed
    # `aws` (the type whose profile files, placements-aws.csv, the runs read).
    spec = load_cluster(DATA / "cluster-16x4-aws.yaml")
    assert len(spec.nodes) == 16
    assert {n.gpus for n in spec.nodes} == {4}
    assert {n.gpu_type for n in spec.nodes} == {"aws"}
