"""Reading cluster descriptions: the ``NxG`` shorthand here, the YAML file format in
``cluster_file`` (loaded only when a file is given, so ``4x8`` costs no YAML parser).

The YAML format (the bundled ``philly-vcs`` and ``rubick-a800`` are examples) lists node groups; bandwidths are written
with units as on a spec sheet (``"400 GB/s"``, ``"100 Gb/s"``) because a bare number is
ambiguous between bits and bytes, a classic factor-of-8 mistake, so we refuse it.
"""

from __future__ import annotations

import re
from pathlib import Path

from shapeshift.cluster_limits import check_cluster_size
from shapeshift.errors import InputError
from shapeshift.model import DEFAULT_CPUS_PER_GPU, DEFAULT_MEM_GB_PER_GPU, ClusterSpec, NodeSpec


def shorthand_cluster(nodes: int, gpus_per_node: int) -> ClusterSpec:
    """``N`` identical nodes of ``G`` GPUs, 8 CPUs and 64 GB host memory per GPU."""
    if nodes < 1 or gpus_per_node < 1:
        raise InputError(f"cluster shorthand needs N >= 1 nodes and G >= 1 GPUs, got {nodes}x{gpus_per_node}")
    check_cluster_size(nodes, gpus_per_node)
    return ClusterSpec(
        tuple(
            NodeSpec(
                name=f"node{i:03d}",
                gpus=gpus_per_node,
                cpus=DEFAULT_CPUS_PER_GPU * gpus_per_node,
                mem_gb=DEFAULT_MEM_GB_PER_GPU * gpus_per_node,
            )
            for i in range(nodes)
        )
    )


_SHORTHAND = re.compile(r"^\s*(\d{1,30})\s*[xX]\s*(\d{1,30})\s*$")


def load_cluster(spec: str | Path) -> ClusterSpec:
    """Accept ``NxG`` (e.g. ``8x8``), the path of a cluster YAML file, a ``slurm.conf``
    (recognised by its ``NodeName=``/``PartitionName=`` lines) or an openb node list (a
    CSV with its ``sn, cpu_milli, memory_mib, gpu, model`` header), or the name of a bundled
    cluster (``philly-vcs``, ``rubick-a800``; a path that exists wins)."""
    from shapeshift.datasets import DATASETS, lookup

    text = str(spec)
    match = _SHORTHAND.match(text)
    if match:
        return shorthand_cluster(int(match.group(1)), int(match.group(2)))
    found = lookup(text)
    if found is not None:
        dataset, text = found[0], str(found[1])
        if dataset.kind != "cluster":
            raise InputError(f"data set {dataset.name!r} is a {dataset.kind}, not a cluster", field="cluster")
    if not Path(text).exists() and not text.endswith((".yaml", ".yml")):
        bundled = ", ".join(d.name for d in DATASETS.values() if d.kind == "cluster")
        raise InputError(
            f"cluster {text!r} is neither NxG (e.g. 8x8), an existing YAML file nor a bundled cluster ({bundled})"
        )
    from shapeshift.workloads.readers.openb import is_openb_node_list, openb_cluster

    if is_openb_node_list(text):
        return openb_cluster(text)
    from shapeshift.slurm.conf import looks_like_slurm_conf

    if looks_like_slurm_conf(text):
        from shapeshift.slurm.cluster import cluster_of
        from shapeshift.slurm.conf import read_slurm_conf

        return cluster_of(read_slurm_conf(text))
    from shapeshift.cluster_file import load_cluster_file

    return load_cluster_file(text)


def parse_bandwidth(value: object) -> float:
    """``"400 GB/s"`` or ``"100 Gb/s"`` -> GB/s (see ``shapeshift.cluster_file``)."""
    from shapeshift.cluster_file import parse_bandwidth as parse

    return parse(value)
