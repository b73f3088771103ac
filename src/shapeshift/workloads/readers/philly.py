"""The Microsoft Philly job file as processed by the Blox project."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from shapeshift.workloads.readers.table import load_table
from shapeshift.workloads.workload import Workload

PHILLY_COLUMNS = ("timestamp", "duration", "num_gpus", "gpu_time", "cluster")


def read_philly(path: str | Path) -> Workload:
    """The Philly job file processed by the Blox project: ``timestamp, duration, num_gpus,
    gpu_time, cluster``; ``cluster`` is the virtual cluster and becomes ``vc``. Jobs get ids
    from their line order in the file, so ids are stable across runs."""
    table = load_table(path)
    table.require(PHILLY_COLUMNS, "philly")
    n = len(table.frame)
    out = pd.DataFrame(
        {
            "job_id": pd.Series(np.arange(n)).astype(str),
            "submit_time": table.times("timestamp"),
            "num_gpus": table.numeric("num_gpus", integer=True).astype("int64"),
            "duration": table.seconds("duration"),
            "vc": table.text("cluster"),
        }
    )
    return Workload.from_frame(Path(path).stem, out)


