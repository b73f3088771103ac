"""Trace readers: files in, validated ``Workload`` out, or one ``InputError`` that says
exactly where the file is wrong (file, line, column).

One module per trace format (``generic``, ``philly``, ``helios``, ``rubick``,
``pollux``, ``synergy``, ``sacct``, ``openb``, and ``kubectl`` for Kubernetes Jobs dumped as
JSON); ``table`` holds the checks they share and ``detect`` picks a
format from a file's header. CSV files may be compressed (``.gz``, ``.zst``) or carry a
byte-order mark; Parquet files are read directly.
"""

from shapeshift.workloads.readers.detect import _SIGNATURES, READERS, detect_format, read_workload
from shapeshift.workloads.readers.generic import read_generic, read_generic_frame
from shapeshift.workloads.readers.helios import HELIOS_COLUMNS, HELIOS_STATES, read_helios
from shapeshift.workloads.readers.kubectl import read_kubectl
from shapeshift.workloads.readers.openb import OPENB_POD_COLUMNS, openb_cluster, read_openb
from shapeshift.workloads.readers.philly import PHILLY_COLUMNS, read_philly
from shapeshift.workloads.readers.pollux import POLLUX_COLUMNS, pollux_reference, read_pollux
from shapeshift.workloads.readers.rubick import (
    RUBICK_BEST_EFFORT_TENANT,
    RUBICK_COLUMNS,
    RUBICK_QUOTA_TENANT,
    read_rubick,
)
from shapeshift.workloads.readers.sacct import SACCT_COLUMNS, SacctNotes, read_sacct, read_sacct_notes
from shapeshift.workloads.readers.synergy import (
    SYNERGY_COLUMNS,
    SYNERGY_ITERATION_SECONDS,
    SYNERGY_SECONDS_PER_ITERATION,
    read_synergy,
)
from shapeshift.workloads.readers.table import MAX_SECONDS

__all__ = [
    "HELIOS_COLUMNS",
    "HELIOS_STATES",
    "MAX_SECONDS",
    "OPENB_POD_COLUMNS",
    "PHILLY_COLUMNS",
    "POLLUX_COLUMNS",
    "READERS",
    "RUBICK_BEST_EFFORT_TENANT",
    "RUBICK_COLUMNS",
    "RUBICK_QUOTA_TENANT",
    "SACCT_COLUMNS",
    "SYNERGY_COLUMNS",
    "SYNERGY_ITERATION_SECONDS",
    "SYNERGY_SECONDS_PER_ITERATION",
    "_SIGNATURES",
    "SacctNotes",
    "detect_format",
    "openb_cluster",
    "pollux_reference",
    "read_generic",
    "read_generic_frame",
    "read_helios",
    "read_kubectl",
    "read_openb",
    "read_philly",
    "read_pollux",
    "read_rubick",
    "read_sacct",
    "read_sacct_notes",
    "read_synergy",
    "read_workload",
]
