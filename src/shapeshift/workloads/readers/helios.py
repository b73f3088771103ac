"""Helios cluster logs (SenseTime, SC'21): datacenter job records with their outcome."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from shapeshift.workloads.readers.table import load_table
from shapeshift.workloads.workload import Workload

HELIOS_COLUMNS = (
    "job_id",
    "user",
    "vc",
    "gpu_num",
    "cpu_num",
    "node_num",
    "state",
    "submit_time",
    "start_time",
    "end_time",
    "duration",
    "queue",
)
#: Final job states of the Helios logs (Slurm states as the Helios artifact keeps them).
HELIOS_STATES = ("COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL")


def read_helios(path: str | Path) -> Workload:
    """A Helios ``cluster_log.csv`` (SenseTime Helios traces, SC'21): ``job_id, user, vc,
    gpu_num, cpu_num, node_num, state, submit_time, start_time, end_time, duration, queue``
    (an optional ``jobname``/``name`` column becomes ``name``).

    * ``gpu_num`` -> ``num_gpus``, ``cpu_num`` -> ``num_cpus``; ``node_num`` is checked but
      not kept (placement is the scheduler's choice in a simulation);
    * ``state`` is kept upper-cased and must be one of ``HELIOS_STATES``;
    * ``start_time``/``end_time`` are kept on the submit clock (seconds after the first
      submission; blank = never started), ``queue`` (seconds) is kept as recorded;
    * CPU-only jobs (``gpu_num`` 0) are kept with ``cpu_only`` set: trace statistics see
      them, ``Workload.jobs()`` leaves them out of a GPU simulation unless asked.
    """
    table = load_table(path)
    table.require(HELIOS_COLUMNS, "helios")
    ids = table.present("job_id").astype(str).str.strip()
    table.unique_ids(ids, "job_id")
    gpus = table.numeric("gpu_num", integer=True).astype("int64")
    table.numeric("node_num", integer=True)
    submit, times = table.clock("submit_time", ("start_time", "end_time"))
    name_column = next((c for c in ("jobname", "name") if c in table.frame.columns), None)
    out = pd.DataFrame(
        {
            "job_id": ids,
            "submit_time": submit,
            "num_gpus": gpus,
            "duration": table.seconds("duration"),
            "name": table.text(name_column) if name_column else "",
            "user": table.text("user"),
            "vc": table.text("vc"),
            "num_cpus": table.numeric("cpu_num"),
            "cpu_only": gpus == 0,
            "state": table.choice("state", HELIOS_STATES),
            "start_time": times["start_time"],
            "end_time": times["end_time"],
            "queue": table.numeric("queue", required=False).astype(float),
        }
    )
    return Workload.from_frame(Path(path).stem, out)


