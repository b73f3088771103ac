"""The Rubick artifact's evaluation traces (plan-aware jobs with requested plans)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from shapeshift.model import ModelError
from shapeshift.workloads.readers.table import load_table
from shapeshift.workloads.workload import Workload

RUBICK_COLUMNS = (
    "name",
    "submission_time",
    "duration",
    "application",
    "num_gpus",
    "num_cpus",
    "bandwidth",
    "exec_plan",
    "steps",
    "is_sla",
)
#: Tenants of a multi-tenant Rubick trace (``workload-mt``): the guaranteed (``is_sla``)
#: jobs belong to the quota tenant, the rest to the best-effort one (tenant A has a
#: 64-GPU quota, B none; see the bundled ``rubick-a800`` cluster).
RUBICK_QUOTA_TENANT = "A"
RUBICK_BEST_EFFORT_TENANT = "B"


def read_rubick(path: str | Path) -> Workload:
    """The Rubick artifact's evaluation traces (``workload-{base,bp,mt}.csv``): ``name,
    submission_time, duration, application, num_gpus, num_cpus, bandwidth, exec_plan,
    steps, is_sla``.

    * ``name`` is the job id (and name); ``application`` -> ``model``; ``steps`` ->
      ``iterations``; ``is_sla`` -> ``guaranteed``; ``duration`` is kept (seconds);
    * ``exec_plan`` -> the requested plan: ``ga`` (plain data parallel), ``gc``
      (gradient checkpointing), ``zero-dp``, ``zero-offload``, ``tp``, any of these
      joined by ``+``, or three digits read as PP, TP, DP (``524`` = PP 5, TP 2, DP 4).
      A plan whose GPU count differs from ``num_gpus`` is an error (none in the
      shipped traces);
    * ``bandwidth`` (the artifact's per-job network figure) is checked but not kept: the
      performance model derives communication from the plan and placement;
    * tenants: a trace with guaranteed jobs is multi-tenant: guaranteed jobs belong to
      tenant ``A`` (the quota tenant), the others to ``B``; a trace without guaranteed
      jobs (``base``, ``bp``) has no tenants.
    """
    from shapeshift.perf.measurements import parse_trace_plan

    table = load_table(path)
    table.require(RUBICK_COLUMNS, "rubick")
    ids = table.present("name").astype(str).str.strip()
    table.unique_ids(ids, "name")
    gpus = table.numeric("num_gpus", integer=True, minimum=1).astype("int64")
    table.numeric("bandwidth")
    plans = []
    parsed: dict[tuple[str, int], str] = {}
    for row, (text, g) in enumerate(
        zip(table.present("exec_plan").astype(str).str.strip(), gpus.tolist(), strict=True)
    ):
        key = (text, g)
        if key not in parsed:
            try:
                parsed[key] = str(parse_trace_plan(text, g))
            except (ValueError, ModelError) as exc:
                raise table.fail(row, "exec_plan", f"{exc} (num_gpus is {g})") from None
        plans.append(parsed[key])
    guaranteed = table.flags("is_sla")
    if guaranteed.any():
        tenant = pd.Series(np.where(guaranteed, RUBICK_QUOTA_TENANT, RUBICK_BEST_EFFORT_TENANT), dtype=object)
    else:
        tenant = pd.Series([""] * len(ids), dtype=object)
    out = pd.DataFrame(
        {
            "job_id": ids,
            "submit_time": table.times("submission_time"),
            "num_gpus": gpus,
            "duration": table.seconds("duration"),
            "name": ids,
            "model": table.present("application").astype(str).str.strip(),
            "num_cpus": table.numeric("num_cpus"),
            "iterations": table.numeric("steps", integer=True).astype("Int64"),
            "plan": pd.Series(plans, dtype=object),
            "guaranteed": guaranteed,
            "tenant": tenant,
        }
    )
    return Workload.from_frame(Path(path).stem, out)


