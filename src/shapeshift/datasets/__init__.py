"""Reference data sets bundled with Shapeshift: traces, clusters and measured speed tables
from the papers it reproduces, each with its source, licence, citation and, for the
workloads, the evaluation setting its paper used.

Every command and function that takes a file path also takes a data set name
(``--workload rubick-base``, ``--cluster philly-vcs``,
``--throughput ground-truth:rubick-a800-tables``, ``rubick-a800-tables/gpt2/placements.csv``);
a path that exists always wins over a name.

    >>> import shapeshift as ss
    >>> ss.datasets.names()[:3]
    ['helios-cluster-summary', 'philly', 'philly-node-sequence']
    >>> ss.datasets.path("philly").name
    'philly_jobs.csv'
"""

from shapeshift.datasets.catalog import DATASETS, Dataset, Setting
from shapeshift.datasets.export import export
from shapeshift.datasets.store import get, locate, lookup, manifest, names, path


def rows(name: str) -> int:
    """Data rows of the data set's main table (jobs of a workload, nodes of a cluster)."""
    return int(manifest()[get(name).name]["rows"])


__all__ = ["DATASETS", "Dataset", "Setting", "export", "get", "locate", "lookup", "names", "path", "rows"]
