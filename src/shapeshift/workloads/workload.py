"""The ``Workload`` type: one validated, columnar table of jobs.

Readers and generators produce a ``Workload`` once; the simulator turns it into
``JobSpec`` objects once. Keeping the table columnar (a pandas DataFrame with fixed
column names and dtypes) makes reading, describing and transforming 100k-job traces
fast, and keeps pandas out of the simulator's per-event path.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from shapeshift.model import ExecutionPlan, JobSpec

#: Canonical columns and their dtypes. ``duration`` is NaN and ``iterations`` is <NA>
#: when unknown; ``plan`` is the canonical plan string or "".
COLUMNS: dict[str, str] = {
    "job_id": "object",
    "submit_time": "float64",
    "num_gpus": "int64",
    "duration": "float64",
    "name": "object",
    "user": "object",
    "vc": "object",
    "tenant": "object",
    "guaranteed": "bool",
    "model": "object",
    "num_cpus": "float64",
    "mem_gb": "float64",
    "iterations": "Int64",
    "plan": "object",
}
REQUIRED = ("job_id", "submit_time", "num_gpus", "duration")
_DEFAULTS = {
    "name": "",
    "user": "",
    "vc": "",
    "tenant": "",
    "guaranteed": False,
    "model": "",
    "num_cpus": 0.0,
    "mem_gb": 0.0,
    "iterations": pd.NA,
    "plan": "",
}


@dataclass(frozen=True)
class Workload:
    """A named job table sorted by submit time (ties keep input order)."""

    name: str
    frame: pd.DataFrame

    @classmethod
    def from_frame(cls, name: str, frame: pd.DataFrame) -> Workload:
        """Fill optional columns with defaults, fix dtypes and sort by submit time."""
        frame = frame.copy()
        for column, default in _DEFAULTS.items():
            if column not in frame.columns:
                frame[column] = default
        frame = frame[list(COLUMNS)].astype(COLUMNS)
        frame = frame.sort_values("submit_time", kind="stable").reset_index(drop=True)
        return cls(name=name, frame=frame)

    @classmethod
    def from_jobs(cls, name: str, jobs: list[JobSpec]) -> Workload:
        rows = [
            {
                "job_id": j.job_id,
                "submit_time": j.submit_time,
                "num_gpus": j.num_gpus,
                "duration": math.nan if j.duration is None else j.duration,
                "name": j.name,
                "user": j.user,
                "vc": j.vc,
                "tenant": j.tenant,
                "guaranteed": j.guaranteed,
                "model": j.model,
                "num_cpus": j.num_cpus,
                "mem_gb": j.mem_gb,
                "iterations": pd.NA if j.iterations is None else j.iterations,
                "plan": "" if j.plan is None else str(j.plan),
            }
            for j in jobs
        ]
        frame = pd.DataFrame(rows, columns=list(COLUMNS)) if rows else pd.DataFrame(columns=list(COLUMNS))
        return cls.from_frame(name, frame)

    def __len__(self) -> int:
        return len(self.frame)

    def jobs(self) -> list[JobSpec]:
        """Materialise ``JobSpec`` objects (column arrays first: row iteration is slow)."""
        f = self.frame
        duration = f["duration"].to_numpy()
        iterations = f["iterations"].to_numpy(dtype=object, na_value=None)
        plans: dict[str, ExecutionPlan | None] = {"": None}
        result = []
        for i, (job_id, submit, gpus, name, user, vc, tenant, guaranteed, model, cpus, mem, plan) in enumerate(
            zip(
                f["job_id"].tolist(),
                f["submit_time"].tolist(),
                f["num_gpus"].tolist(),
                f["name"].tolist(),
                f["user"].tolist(),
                f["vc"].tolist(),
                f["tenant"].tolist(),
                f["guaranteed"].tolist(),
                f["model"].tolist(),
                f["num_cpus"].tolist(),
                f["mem_gb"].tolist(),
                f["plan"].tolist(),
                strict=True,
            )
        ):
            if plan not in plans:
                plans[plan] = ExecutionPlan.parse(plan)
            d = duration[i]
            it = iterations[i]
            result.append(
                JobSpec(
                    job_id=job_id,
                    submit_time=submit,
                    num_gpus=gpus,
                    duration=None if np.isnan(d) else float(d),
                    name=name,
                    user=user,
                    vc=vc,
                    tenant=tenant,
                    guaranteed=guaranteed,
                    model=model,
                    num_cpus=cpus,
                    mem_gb=mem,
                    iterations=None if it is None else int(it),
                    plan=plans[plan],
                )
            )
        return result

    def write(self, path: str | Path) -> None:
        """Write as CSV or Parquet (by extension) in the generic format the readers accept."""
        path = Path(path)
        if path.suffix == ".parquet":
            self.frame.to_parquet(path, index=False)
        else:
            self.frame.to_csv(path, index=False)
