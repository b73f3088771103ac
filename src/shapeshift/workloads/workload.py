"""The ``Workload`` type: one validated, columnar table of jobs.

Readers and generators produce a ``Workload`` once; the simulator turns it into
``JobSpec`` objects once. Keeping the table columnar (a pandas DataFrame with fixed
column names and dtypes) makes reading, describing and transforming 100k-job traces
fast, and keeps pandas out of the simulator's per-event path.

A workload generated as a list of jobs (the seeded demo) keeps that list and builds its
table only when one is asked for, so simulating it never imports pandas.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator, Sequence
from itertools import repeat
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shapeshift.model import BatchSpec, ExecutionPlan, JobSpec

if TYPE_CHECKING:
    import pandas as pd

#: Canonical columns and their dtypes. ``duration`` is NaN and ``iterations`` is <NA>
#: when unknown; ``plan`` is the canonical plan string or "".
#:
#: ``cpu_only`` marks a CPU-only job of a mixed datacenter log (Helios): kept for
#: characterization, left out of GPU simulation unless ``jobs(include_cpu_only=True)``.
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
    "cpu_only": "bool",
    "batch": "object",
    "gpu_speed": "object",
}
#: Columns only a datacenter log has (Helios schema): they describe what happened to the
#: job in the real cluster, never reach ``JobSpec``, and are kept only when the source
#: has them, so "column present" means "the trace records it" (what trace
#: characterization relies on). ``state`` is the final state (COMPLETED, CANCELLED,
#: FAILED, TIMEOUT, NODE_FAIL); ``start_time``/``end_time`` are seconds on the same
#: clock as ``submit_time`` (NaN for a job that never started); ``queue`` is the
#: recorded queueing delay in seconds. A Slurm history (``sacct``) adds ``time_limit``
#: (seconds, NaN = the partition's) and ``qos``, which do reach ``JobSpec`` (Slurm's
#: scheduler plans with them), and ``attempts`` (1 + requeues) and the recorded
#: ``priority``, which do not. A GPU-sharing trace (openb) adds ``gpu_milli`` (a share of
#: one GPU in thousandths, 0 = whole GPUs) and ``gpu_types`` (the GPU models a job allows,
#: ``|``-separated, empty = any), which reach ``JobSpec`` too. A Kubernetes job table adds ``namespace``,
#: ``queue_name`` (the queue a job is submitted to: not ``queue``, which is the
#: recorded delay), ``priority_class`` and ``pods`` (gang size), which reach ``JobSpec``.
OPTIONAL_COLUMNS: dict[str, str] = {
    "state": "object",
    "start_time": "float64",
    "end_time": "float64",
    "queue": "float64",
    "time_limit": "float64",
    "qos": "object",
    "attempts": "Int64",
    "priority": "float64",
    "gpu_milli": "int64",
    "gpu_types": "object",
    "namespace": "object",
    "queue_name": "object",
    "priority_class": "object",
    "pods": "int64",
}
#: The Kubernetes batch-queueing columns (``K8S_COLUMNS``): kept when a trace gives them,
#: and passed on to ``JobSpec`` (Kueue and KAI-Scheduler read them).
K8S_COLUMNS = ("namespace", "queue_name", "priority_class", "pods")
REQUIRED = ("job_id", "submit_time", "num_gpus", "duration")

#: Most jobs a generated workload may have, wherever it is generated (``workload
#: generate``, experiment generators, the Python API): about 2.4 GB in memory at 10
#: million jobs, within the 24 GB of a development machine; the 100-million-job trace a
#: user once asked for needed 23.8 GB, and 10^12 asked numpy for 7 TiB.
MAX_JOBS = 10_000_000
_NA: Any = object()  # stands for pandas.NA until pandas is loaded
_DEFAULTS = {
    "name": "",
    "user": "",
    "vc": "",
    "tenant": "",
    "guaranteed": False,
    "model": "",
    "num_cpus": 0.0,
    "mem_gb": 0.0,
    "iterations": _NA,
    "plan": "",
    "cpu_only": False,
    "batch": "",
    "gpu_speed": "",
}


def format_gpu_speed(speeds: tuple[tuple[str, float], ...]) -> str:
    """The ``gpu_speed`` column's text for a job's per-type throughputs: ``K80=1.8;V100=18``."""
    return ";".join(f"{gpu_type}={value:g}" for gpu_type, value in speeds)


def _parsed(values: list[str], parse: Callable[[str], Any], empty: Any) -> Iterator[Any]:
    """``parse`` of each text in ``values`` ("" is ``empty``), each distinct text parsed
    once, lazily: a bad text raises when its row is reached, after the rows before it."""
    if not any(values):  # the column is empty, as most are in most traces
        return repeat(empty, len(values))
    return _parse_each(values, parse, empty)


def _parse_each(values: list[str], parse: Callable[[str], Any], empty: Any) -> Iterator[Any]:
    known: dict[str, Any] = {"": empty}
    for text in values:
        value = known.get(text, known)
        if value is known:
            value = known[text] = parse(text)
        yield value


def _type_set(text: str) -> frozenset[str]:
    """The GPU types a ``gpu_types`` cell allows ("a|b"; empty = any)."""
    return frozenset(p for p in text.split("|") if p)


#: Columns whose values are ``JobSpec``'s as they are.
_AS_IS = (
    "job_id",
    "submit_time",
    "num_gpus",
    "name",
    "user",
    "vc",
    "tenant",
    "guaranteed",
    "model",
    "num_cpus",
    "mem_gb",
)
#: ``JobSpec``'s fields in declaration order, with their defaults.
_JOB_FIELDS = [(f.name, f.default) for f in dataclasses.fields(JobSpec)]


def parse_gpu_speed(text: str) -> tuple[tuple[str, float], ...]:
    """Inverse of ``format_gpu_speed``; ValueError names the bad part."""
    pairs = []
    for part in filter(None, (p.strip() for p in text.split(";"))):
        gpu_type, sep, value = part.partition("=")
        if not sep or not gpu_type.strip():
            raise ValueError(f"expected TYPE=THROUGHPUT, got {part!r}")
        number = float(value)
        if not (math.isfinite(number) and number >= 0):
            raise ValueError(f"throughput of {gpu_type.strip()} must be finite and >= 0, got {value.strip()!r}")
        pairs.append((gpu_type.strip(), number))
    return tuple(sorted(pairs))


class Workload:
    """A named job table sorted by submit time (ties keep input order). Immutable.

    Built from a table (``from_frame``, what readers produce) or from a list of jobs
    (``of_jobs``, what the demo generator produces); either form gives the other on
    demand: ``frame`` the table, ``jobs()`` the ``JobSpec`` objects.
    """

    __slots__ = ("_frame", "_jobs", "name")

    def __init__(self, name: str, frame: pd.DataFrame | None = None, *, jobs: Sequence[JobSpec] | None = None):
        if frame is None and jobs is None:
            raise ValueError("a Workload needs a frame or a job list")
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "_frame", frame)
        object.__setattr__(self, "_jobs", None if jobs is None else tuple(jobs))

    def __setattr__(self, key: str, value: object) -> None:
        raise AttributeError("Workload is immutable")

    def __reduce__(self) -> tuple[Any, ...]:
        return (_restore, (self.name, self._frame, self._jobs))

    def __repr__(self) -> str:
        return f"Workload(name={self.name!r}, jobs={len(self)})"

    @property
    def has_frame(self) -> bool:
        """Whether the job table exists already (else ``frame`` builds it from the jobs)."""
        return self._frame is not None

    @property
    def frame(self) -> pd.DataFrame:
        """The job table (built from the job list on first use)."""
        if self._frame is None:
            object.__setattr__(self, "_frame", _frame_of(list(self._jobs or ())))
        return self._frame

    @classmethod
    def from_frame(cls, name: str, frame: pd.DataFrame) -> Workload:
        """Fill optional columns with defaults, fix dtypes and sort by submit time. Trace-log
        columns (``OPTIONAL_COLUMNS``) are kept only when ``frame`` has them; any other
        column is dropped."""
        import pandas as pd

        frame = frame.copy()
        for column, default in _DEFAULTS.items():
            if column not in frame.columns:
                frame[column] = pd.NA if default is _NA else default
        dtypes = dict(COLUMNS)
        dtypes.update({c: t for c, t in OPTIONAL_COLUMNS.items() if c in frame.columns})
        frame = frame[list(dtypes)].astype(dtypes)
        frame = frame.sort_values("submit_time", kind="stable").reset_index(drop=True)
        return cls(name, frame)

    @classmethod
    def of_jobs(cls, name: str, jobs: Sequence[JobSpec]) -> Workload:
        """A workload kept as its job list (sorted by submit time, ties in order); its table
        is built only if asked for."""
        return cls(name, jobs=sorted(jobs, key=lambda j: j.submit_time))

    @classmethod
    def from_jobs(cls, name: str, jobs: Sequence[JobSpec]) -> Workload:
        """A workload built as a table from ``jobs``."""
        return cls.from_frame(name, _frame_of(jobs))

    def __eq__(self, other: object) -> bool:
        # Same name and the same jobs (a DataFrame has no truth value: compare cell by cell).
        if not isinstance(other, Workload):
            return NotImplemented
        if self._jobs is not None and other._jobs is not None:
            return self.name == other.name and self._jobs == other._jobs
        return self.name == other.name and self.frame.equals(other.frame)

    __hash__ = None  # type: ignore[assignment]

    def __len__(self) -> int:
        return len(self._jobs) if self._jobs is not None else len(self.frame)

    @property
    def cpu_only_count(self) -> int:
        return 0 if self._jobs is not None else int(self.frame["cpu_only"].sum())

    def jobs(self, include_cpu_only: bool = False) -> list[JobSpec]:
        """Materialise ``JobSpec`` objects (column arrays first: row iteration is slow).

        Jobs flagged ``cpu_only`` are left out unless ``include_cpu_only`` is true: a GPU
        simulation has nothing to say about them.
        """
        if self._jobs is not None:
            return list(self._jobs)
        f = self.frame
        if not include_cpu_only and f["cpu_only"].any():
            f = f[~f["cpu_only"]]
        n = len(f)

        def column(name: str, absent: Any = None) -> list[Any]:
            return f[name].tolist() if name in f.columns else [absent] * n

        columns: dict[str, Any] = {name: f[name].tolist() for name in _AS_IS}
        durations = f["duration"].tolist()  # Python floats; NaN = no duration
        columns["duration"] = [None if d != d else float(d) for d in durations]
        its = f["iterations"].to_numpy(dtype=object, na_value=None).tolist()
        columns["iterations"] = [None if it is None else int(it) for it in its]
        limits = column("time_limit", math.nan)
        columns["plan"] = _parsed(f["plan"].tolist(), ExecutionPlan.parse, None)
        columns["batch"] = _parsed(f["batch"].tolist(), BatchSpec.parse, None)
        columns["gpu_speed"] = _parsed(f["gpu_speed"].tolist(), parse_gpu_speed, ())
        columns["time_limit"] = [None if t != t else float(t) for t in limits]
        columns["qos"] = column("qos", "")
        columns["gpu_milli"] = column("gpu_milli", 0)
        columns["gpu_types"] = _parsed(column("gpu_types", ""), _type_set, frozenset())
        for name in K8S_COLUMNS:
            columns[name] = column(name, 1 if name == "pods" else "")
        # Every field in declaration order, positionally (a field without a column gets
        # its default): one call per job and no loop body, what makes 100k jobs cheap.
        fields = [columns[name] if name in columns else repeat(default) for name, default in _JOB_FIELDS]
        return list(map(JobSpec, *fields))

    def write(self, path: str | Path) -> None:
        """Write as CSV or Parquet (by extension) in the generic format the readers accept."""
        path = Path(path)
        if path.suffix == ".parquet":
            self.frame.to_parquet(path, index=False)
        else:
            self.frame.to_csv(path, index=False)


def _restore(name: str, frame: pd.DataFrame | None, jobs: tuple[JobSpec, ...] | None) -> Workload:
    return Workload(name, frame, jobs=jobs)


def _frame_of(jobs: Sequence[JobSpec]) -> pd.DataFrame:
    """The canonical columns of ``jobs``, one row per job, in the given order."""
    import pandas as pd

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
            "cpu_only": False,
            "batch": "" if j.batch is None else str(j.batch),
            "gpu_speed": format_gpu_speed(j.gpu_speed),
        }
        for j in jobs
    ]
    frame = pd.DataFrame(rows, columns=list(COLUMNS)) if rows else pd.DataFrame(columns=list(COLUMNS))
    if any(j.time_limit is not None or j.qos for j in jobs):
        frame["time_limit"] = [math.nan if j.time_limit is None else j.time_limit for j in jobs]
        frame["qos"] = [j.qos for j in jobs]
    if any(j.gpu_milli or j.gpu_types for j in jobs):
        frame["gpu_milli"] = [j.gpu_milli for j in jobs]
        frame["gpu_types"] = ["|".join(sorted(j.gpu_types)) for j in jobs]
    if any(j.namespace or j.queue_name or j.priority_class or j.pods != 1 for j in jobs):
        for column in K8S_COLUMNS:
            frame[column] = [getattr(j, column) for j in jobs]
    return Workload.from_frame("", frame).frame
