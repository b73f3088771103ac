"""Run an experiment: build each distinct workload and cluster once, hash the run inputs,
skip runs already finished, execute the rest in worker processes (or on Ray), and write
the tidy results table.

Each run writes ``runs/<run-id>/`` with ``summary.json``, ``jobs.csv``,
``rejected.csv``, ``intervals.csv`` (exact GPU-holding intervals), ``run.json`` (its
inputs and labels) and, for the ``auto`` policy, ``auto_timeline.csv``. It is written
under ``runs/.partial-*`` and renamed into place only when complete, so an interrupted
experiment resumes where it stopped: finished runs are reused, partial ones redone.

A run that raises does not stop the others; the outcome lists it and the results table
holds the runs that finished.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import traceback
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from shapeshift.cluster import load_cluster
from shapeshift.errors import InputError
from shapeshift.experiments.cache import (
    PARTIAL_PREFIX,
    clean_partials,
    cluster_fingerprint,
    directory_fingerprint,
    is_finished,
    run_id,
    run_inputs,
)
from shapeshift.experiments.expand import RunPlan, expand
from shapeshift.experiments.results import write_results
from shapeshift.experiments.schema import Experiment, policy_args
from shapeshift.experiments.workloads import build_workload, content_hash
from shapeshift.model import ClusterSpec
from shapeshift.runs import EnergySpec, RunSpec, ThroughputSpec, run
from shapeshift.runs.backends import Backend, check_backend, ray_map
from shapeshift.workloads.workload import Workload

ProgressCallback = Callable[[int, int], None]


@dataclass(frozen=True)
class RunTask:
    """What a worker needs for one run (picklable)."""

    run_id: str
    plan: RunPlan
    workload: Workload
    #: The cluster as written (NxG or a file path): ``ClusterSpec`` holds mapping proxies,
    #: which do not pickle, and re-reading it costs next to nothing.
    cluster: str
    runs_dir: str
    inputs: dict[str, Any]


@dataclass(frozen=True)
class RunOutcome:
    run_id: str
    ok: bool
    error: str = ""
    wall_seconds: float = 0.0


@dataclass(frozen=True)
class ExperimentOutcome:
    out: Path
    total: int
    distinct: int
    executed: int
    cached: int
    failed: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    wall_seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failed


def run_spec(task: RunTask) -> RunSpec:
    """The ``RunSpec`` of a task: the experiment's runs always record intervals."""
    plan = task.plan
    return RunSpec(
        workload=task.workload,
        cluster=load_cluster(task.cluster),
        policy=plan.policy,
        params=tuple(policy_args(dict(plan.params)).items()),
        round_seconds=plan.round,
        overheads=plan.overheads,
        seed=plan.seed,
        throughput=plan.throughput,
        energy=plan.energy,
        window=plan.window,
        record=frozenset({"intervals"}),
    )


def execute_run(task: RunTask) -> RunOutcome:
    """Simulate one run and move its directory into place. Never raises: failures are returned."""
    started = time.perf_counter()
    runs_dir = Path(task.runs_dir)
    final = runs_dir / task.run_id
    tmp = runs_dir / f"{PARTIAL_PREFIX}{task.run_id}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        result = run(run_spec(task))
        result.write(tmp, extra={"run_id": task.run_id})
        record = {"run_id": task.run_id, "labels": task.plan.labels(), "inputs": task.inputs}
        (tmp / "run.json").write_text(json.dumps(record, indent=2, sort_keys=True, default=str) + "\n")
        if final.exists():  # a stale, incomplete directory under the final name
            shutil.rmtree(final)
        os.rename(tmp, final)
    except Exception as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        where = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
        at = f" (at {Path(where.filename).name}:{where.lineno})" if where else ""
        return RunOutcome(task.run_id, False, f"{type(exc).__name__}: {exc}{at}", time.perf_counter() - started)
    return RunOutcome(task.run_id, True, "", time.perf_counter() - started)


class _Inputs:
    """Builds each distinct workload and cluster once per experiment."""

    def __init__(self, experiment: Experiment):
        self.experiment = experiment
        self._workloads: dict[str, tuple[Workload, str]] = {}
        self._clusters: dict[str, tuple[ClusterSpec, str]] = {}
        self._throughputs: dict[tuple[str, str | None], dict[str, Any]] = {}

    def workload(self, plan: RunPlan) -> tuple[Workload, str]:
        key = plan.workload.key()
        if key not in self._workloads:
            data = build_workload(plan.workload)
            window = self.experiment.window
            if window is not None and window[0] >= len(data):
                raise InputError(
                    f"window starts at job {window[0]} but workload {plan.workload.name!r} has {len(data)} jobs",
                    path=self.experiment.path,
                    field="window.start",
                )
            self._workloads[key] = (data, content_hash(data))
        return self._workloads[key]

    def throughput(self, spec: ThroughputSpec) -> dict[str, Any] | None:
        """The speed model's record for the cache key: its kind and its data's content."""
        if spec.kind == "trace" and spec.path is None:
            return None
        key = (spec.kind, spec.path)
        if key not in self._throughputs:
            data = directory_fingerprint(spec.path) if spec.path else None
            self._throughputs[key] = {"kind": spec.kind, "data_sha256": data}
        return self._throughputs[key]

    def cluster(self, plan: RunPlan) -> tuple[ClusterSpec, str]:
        if plan.cluster not in self._clusters:
            spec = load_cluster(plan.cluster)
            self._clusters[plan.cluster] = (spec, cluster_fingerprint(spec))
        return self._clusters[plan.cluster]


def _tasks(experiment: Experiment, plans: list[RunPlan], runs_dir: Path) -> tuple[list[str], list[RunTask]]:
    """The run id of every plan, and one task per distinct run id."""
    inputs = _Inputs(experiment)
    ids: list[str] = []
    tasks: dict[str, RunTask] = {}
    for plan in plans:
        workload, wl_hash = inputs.workload(plan)
        _, cl_hash = inputs.cluster(plan)
        record = run_inputs(
            workload_hash=wl_hash,
            cluster_hash=cl_hash,
            policy=plan.policy,
            params=dict(plan.params),
            overheads=asdict(plan.overheads),
            round_seconds=plan.round,
            seed=plan.seed,
            window=plan.window,
            throughput=inputs.throughput(plan.throughput),
            energy=_energy_record(plan.energy),
        )
        rid = run_id(record)
        ids.append(rid)
        if rid not in tasks:
            tasks[rid] = RunTask(rid, plan, workload, plan.cluster, str(runs_dir), record)
    return ids, list(tasks.values())


def _energy_record(spec: EnergySpec | None) -> dict[str, Any] | None:
    if spec is None:
        return None
    return {"mode": spec.mode, "params": dict(spec.params), "baseline": spec.baseline}


def _run_processes(tasks: list[RunTask], workers: int, on_done: Callable[[RunOutcome], None]) -> None:
    if workers <= 1 or len(tasks) <= 1:
        for task in tasks:
            on_done(execute_run(task))
        return
    pool = ProcessPoolExecutor(max_workers=min(workers, len(tasks)))
    try:
        futures: dict[Future[RunOutcome], str] = {pool.submit(execute_run, t): t.run_id for t in tasks}
        pending = set(futures)
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in sorted(done, key=futures.__getitem__):
                try:
                    on_done(future.result())
                except Exception as exc:  # the worker died (killed, out of memory) or could not pickle
                    on_done(RunOutcome(futures[future], False, f"{type(exc).__name__}: {exc}"))
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()


def _run_ray(tasks: list[RunTask], on_done: Callable[[RunOutcome], None]) -> None:
    """Spread runs over a Ray cluster (``RAY_ADDRESS`` or a local one). The output
    directory must be on a file system every Ray node can write."""
    for _, outcome in ray_map(execute_run, [(t,) for t in tasks], in_flight=len(tasks)):
        on_done(outcome)


def run_experiment(
    experiment: Experiment,
    out: str | Path,
    *,
    workers: int = 1,
    backend: Backend | str = "processes",
    progress: ProgressCallback | None = None,
    only: Iterable[int] | None = None,
) -> ExperimentOutcome:
    """Run every run of ``experiment`` not already finished in ``out``; write the results table.

    ``only`` restricts the run set to the given plan indexes (for tests and debugging).
    """
    started = time.perf_counter()
    check_backend(backend)
    if workers < 1:
        raise InputError("--workers must be >= 1", field="--workers")
    out = Path(out)
    runs_dir = out / "runs"
    runs_dir.mkdir(parents=True, exist_ok=True)
    clean_partials(runs_dir)
    (out / "experiment.yaml").write_text(experiment.text)
    plans = expand(experiment)
    if only is not None:
        keep = set(only)
        plans = [p for p in plans if p.index in keep]
    ids, tasks = _tasks(experiment, plans, runs_dir)
    todo = [t for t in tasks if not is_finished(runs_dir / t.run_id)]
    cached = len(tasks) - len(todo)
    done = cached
    failed: list[tuple[str, str]] = []
    if progress is not None:
        progress(done, len(tasks))

    def on_done(outcome: RunOutcome) -> None:
        nonlocal done
        done += 1
        if not outcome.ok:
            failed.append((outcome.run_id, outcome.error))
        if progress is not None:
            progress(done, len(tasks))

    if backend == "ray":
        _run_ray(todo, on_done)
    else:
        _run_processes(todo, workers, on_done)
    write_results(out, plans, ids)
    failed_ids = {f[0] for f in failed}
    labels = {rid: plan for plan, rid in zip(plans, ids, strict=True)}
    described = tuple(
        (f"{rid} ({_describe(labels[rid])})", error) for rid, error in sorted(failed) if rid in failed_ids
    )
    return ExperimentOutcome(
        out=out,
        total=len(plans),
        distinct=len(tasks),
        executed=len(todo) - len(failed),
        cached=cached,
        failed=described,
        wall_seconds=time.perf_counter() - started,
    )


def _describe(plan: RunPlan) -> str:
    return ", ".join(f"{k}={v}" for k, v in plan.labels().items() if v is not None)
