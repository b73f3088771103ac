"""Synergy's replay traces (msr-fiddle/synergy), with or without a header."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from shapeshift.perf.synergy_profiles import PROFILES
from shapeshift.workloads.readers.table import load_table
from shapeshift.workloads.workload import Workload

SYNERGY_COLUMNS = ("job_id", "model", "arrival", "num_iters", "gpu_demand")
#: Seconds per iteration for a model Synergy does not profile (its convention for traces
#: derived from job durations: ``iter_is_duration``).
SYNERGY_SECONDS_PER_ITERATION = 1.0
#: Synergy's per-model iteration times (s, one GPU, the proportional CPU share): the
#: ``iter_time`` of ``simulator/models/<model>_1.py`` in msr-fiddle/synergy
#: (:mod:`shapeshift.perf.synergy_profiles`). Its simulator runs a job for ``num_iters`` of
#: these (0.011 s for lstm to 0.78 s for res50), not one second each.
SYNERGY_ITERATION_SECONDS: dict[str, float] = {m: p.iteration_seconds for m, p in PROFILES.items()}


def _looks_headerless(columns: list[str]) -> bool:
    if len(columns) != len(SYNERGY_COLUMNS):
        return False
    numeric = pd.to_numeric(pd.Series([columns[i] for i in (0, 2, 3, 4)]), errors="coerce")
    return bool(numeric.notna().all())


def read_synergy(path: str | Path, seconds_per_iteration: float | Mapping[str, float] | None = None) -> Workload:
    """Synergy replay traces (msr-fiddle/synergy): ``job_id, model, arrival, num_iters,
    gpu_demand``, with that header or headerless as the Synergy simulator writes them.

    ``arrival`` is seconds; ``gpu_demand`` -> ``num_gpus``; ``num_iters`` ->
    ``iterations``. ``duration`` = iterations x ``seconds_per_iteration`` (one number, or
    a mapping by model; by default Synergy's own per-model iteration times,
    :data:`SYNERGY_ITERATION_SECONDS`, and 1 s for other models) so that the jobs also
    replay with the duration-based throughput model.
    """
    table = load_table(path)
    columns = list(table.frame.columns)
    if table.is_csv and not set(SYNERGY_COLUMNS) <= set(columns) and _looks_headerless(columns):
        table = load_table(path, names=SYNERGY_COLUMNS)
    table.require(SYNERGY_COLUMNS, "synergy")
    ids = table.present("job_id").astype(str).str.strip()
    table.unique_ids(ids, "job_id")
    models = table.present("model").astype(str).str.strip()
    iterations = table.numeric("num_iters", integer=True)
    if seconds_per_iteration is None:
        per_iteration = models.map(lambda m: SYNERGY_ITERATION_SECONDS.get(m, SYNERGY_SECONDS_PER_ITERATION))
        per_iteration = per_iteration.astype(float)
    elif isinstance(seconds_per_iteration, Mapping):
        missing = models[~models.isin(list(seconds_per_iteration))]
        if not missing.empty:
            raise table.fail(
                int(missing.index[0]), "model", f"no seconds per iteration given for model {missing.iloc[0]!r}"
            )
        per_iteration = models.map(dict(seconds_per_iteration)).astype(float)
    else:
        per_iteration = pd.Series(float(seconds_per_iteration), index=models.index)
    out = pd.DataFrame(
        {
            "job_id": ids,
            "submit_time": table.times("arrival"),
            "num_gpus": table.numeric("gpu_demand", integer=True).astype("int64"),
            "duration": iterations.astype(float) * per_iteration,
            "model": models,
            "iterations": iterations.astype("Int64"),
        }
    )
    return Workload.from_frame(Path(path).stem, out)


