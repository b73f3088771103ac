"""Turning what a user hands over into a workload and a cluster.

One place decides what ``workload=`` and ``cluster=`` may be, for the command line and
for ``import shapeshift`` alike, so both accept the same things and refuse the rest with
the same messages:

* a workload is a trace path (CSV or Parquet, format detected or named), a ``Workload``,
  a pandas ``DataFrame`` in the generic format, or ``None`` for the built-in demo;
* a cluster is ``"NxG"``, a cluster YAML path, a ``ClusterSpec``, or ``None`` for the demo
  cluster.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from shapeshift.cluster import load_cluster
from shapeshift.errors import InputError
from shapeshift.model import ClusterSpec
from shapeshift.runs.defaults import DEMO_CLUSTER, DEMO_JOBS
from shapeshift.workloads.workload import Workload


def demo_workload(seed: int = 0) -> Workload:
    from shapeshift.workloads.synthetic import PoissonSpec, poisson_workload

    return poisson_workload(PoissonSpec(jobs=DEMO_JOBS, seed=seed), name=f"demo-poisson-seed{seed}")


def resolve_workload(workload: Any = None, fmt: str | None = None, seed: int = 0) -> Workload:
    """A ``Workload`` from a path, a ``Workload``, a ``DataFrame`` or ``None`` (the demo)."""
    if workload is None:
        from shapeshift.runs.spec import check_seed

        check_seed(seed)
        return demo_workload(seed)
    if isinstance(workload, Workload):
        return workload
    if isinstance(workload, str | Path):
        from shapeshift.workloads.readers import read_workload

        return read_workload(workload, fmt)
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas is a core dependency
        pd = None
    if pd is not None and isinstance(workload, pd.DataFrame):
        from shapeshift.workloads.readers import read_generic_frame

        return read_generic_frame(workload)
    raise InputError(
        f"workload must be a trace path, a Workload or a pandas DataFrame, got {type(workload).__name__}",
        field="workload",
    )


def resolve_cluster(cluster: Any = None) -> ClusterSpec:
    """A ``ClusterSpec`` from ``"NxG"``, a YAML path, a ``ClusterSpec`` or ``None`` (the demo)."""
    if cluster is None:
        return load_cluster(DEMO_CLUSTER)
    if isinstance(cluster, ClusterSpec):
        return cluster
    if isinstance(cluster, str | Path):
        return load_cluster(cluster)
    raise InputError(
        f"cluster must be 'NxG', a cluster file path or a ClusterSpec, got {type(cluster).__name__}", field="cluster"
    )
