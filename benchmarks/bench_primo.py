"""Primo figures for the docs: duration prediction, monotone effect, model choice, CES.

    python benchmarks/bench_primo.py [--part helios|philly|ces|all] [--trials 12] [--jobs 20000]

* ``helios``: a generated, seeded Helios-schema trace with users, VCs and job names
  (``helios_like``; nothing in it is fitted to a real trace). Time-ordered split
  (``shapeshift.predict.primo.trace``: latest 20% of submissions = test, training = jobs
  finished before the first test submission). MAE and R^2 of log1p(duration) on the test
  jobs for PrAM and PrDT at their defaults, the model ``select_model`` chooses (its
  validation is the newest 20% of the *training* jobs, so nothing is tuned on the test
  jobs), LightGBM with the ``gbdt`` estimator's settings, and the rolling estimator P_R
  fed the training jobs; then PrAM with a monotone constraint on ``gpus``.
* ``philly``: the same on the bundled ``philly`` trace (GPUs, VC and time features only:
  the file has no users or names).
* ``prdt``: the PrDT-only search on both traces, grown in full and pruned (the source's,
  the default) against our depth- and leaf-limited search (``prdt_limits=True``): test MAE,
  complexity and the chosen settings.
* ``ces``: forecast SMAPE on the held-out Philly days of the bundled
  ``philly-node-sequence`` (``energy replay`` defaults, 14 days): PrAM vs LightGBM vs seasonal naive.

Wall times depend on the machine's load (the figures in the README were taken on a shared
2-core machine).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from shapeshift import datasets
from shapeshift.engine.state import JobState, JobStatus
from shapeshift.model import JobSpec
from shapeshift.predict.primo import PrAMRegressor, PrDTRegressor
from shapeshift.predict.primo.select import select_model
from shapeshift.predict.primo.trace import TraceTable, duration_table, regression_metrics, time_split
from shapeshift.predict.rolling import RollingEstimator
from shapeshift.workloads.readers import read_workload

WORDS = ("resnet", "bert", "gpt", "vit", "yolo", "unet", "lstm", "moco", "detr", "t5", "swin", "mae")
TASKS = ("train", "eval", "finetune", "pretrain", "debug", "sweep")


def helios_like(jobs: int, seed: int = 0, days: float = 60.0) -> pd.DataFrame:
    """A seeded Helios-schema trace: user habits set the scale, names the task, GPUs a little.

    log(duration) = user base (N(7.5, 1.2)) + name offset (N(0, 0.8)) + 0.2 log2(GPUs)
    + 0.3 on weekdays 9-18 h + N(0, 0.7); 15% of jobs fail early (e^U(3, 6) s)."""
    rng = np.random.default_rng(seed)
    users = 200
    activity = 1.0 / np.arange(1, users + 1) ** 0.8
    activity /= activity.sum()
    base = rng.normal(7.5, 1.2, users)
    vc_of = rng.integers(0, 10, users)
    templates = [
        [
            (f"{rng.choice(WORDS)}_{rng.choice(TASKS)}", rng.normal(0, 0.8), int(rng.choice([1, 1, 2, 4, 8, 8, 16])))
            for _ in range(rng.integers(1, 6))
        ]
        for _ in range(users)
    ]
    submit = np.sort(rng.uniform(0, days * 86400, jobs))
    hour = (submit // 3600) % 24
    weekday = (submit // 86400 + 3) % 7  # epoch 0 was a Thursday
    user = rng.choice(users, jobs, p=activity)
    rows = []
    for i in range(jobs):
        u = user[i]
        name, offset, gpus = templates[u][rng.integers(len(templates[u]))]
        busy = 0.3 if weekday[i] < 5 and 9 <= hour[i] < 18 else 0.0
        log_d = base[u] + offset + 0.2 * math.log2(gpus) + busy + rng.normal(0, 0.7)
        if rng.random() < 0.15:
            log_d = rng.uniform(3, 6)
        duration = float(round(math.exp(log_d)))
        rows.append(
            {
                "job_id": f"j{i}",
                "user": f"user{u}",
                "vc": f"vc{vc_of[u]}",
                "jobname": f"{name}_v{rng.integers(1, 50)}",
                "gpu_num": gpus,
                "cpu_num": 4 * gpus,
                "node_num": max(1, gpus // 8),
                "state": "COMPLETED",
                "submit_time": float(round(submit[i])),
                "start_time": float(round(submit[i])),
                "end_time": float(round(submit[i])) + duration,
                "duration": duration,
                "queue": 0,
            }
        )
    return pd.DataFrame(rows)


def lightgbm_log(table: TraceTable, train: np.ndarray, test: np.ndarray) -> np.ndarray:
    """LightGBM with the ``gbdt`` estimator's settings (50 rounds, 31 leaves, categorical codes)."""
    import lightgbm as lgb

    params = {
        "objective": "regression",
        "num_leaves": 31,
        "learning_rate": 0.1,
        "min_data_in_leaf": 5,
        "num_threads": 1,
        "deterministic": True,
        "force_row_wise": True,
        "seed": 0,
        "verbose": -1,
    }
    categorical = [c for c in ("user", "vc", "name_bucket") if c in table.x.columns]
    data = lgb.Dataset(table.x.iloc[train], table.y[train], categorical_feature=categorical)
    return lgb.train(params, data, num_boost_round=50).predict(table.x.iloc[test], num_threads=1)


def rolling_log(workload: Any, table_index: pd.Index, train: np.ndarray, test: np.ndarray) -> np.ndarray:
    """P_R (the Helios artifact's rolling means) fed every training job, asked about every test job."""
    frame = workload.frame.loc[table_index]
    estimator = RollingEstimator()

    def status(row: Any) -> JobStatus:
        spec = JobSpec(
            job_id=str(row.job_id),
            submit_time=float(row.submit_time),
            num_gpus=int(row.num_gpus),
            duration=float(row.duration),
            user=str(row.user),
            name=str(row.name),
            vc=str(row.vc),
        )
        return JobStatus(spec, spec.vc)

    for row in frame.iloc[train].itertuples():
        done = status(row)
        done.state, done.end_time, done.run_seconds = JobState.COMPLETED, row.submit_time + row.duration, row.duration
        estimator.observe(done)
    return np.log1p([estimator.predict(status(row)) for row in frame.iloc[test].itertuples()])


def duration_figures(label: str, workload: Any, epoch: float, trials: int) -> dict[str, Any]:
    table = duration_table(workload, epoch)
    train, test = time_split(table, 0.2)
    types = table.feature_types()
    xtr, ytr, xte, yte = table.x.iloc[train], table.y[train], table.x.iloc[test], table.y[test]
    out: dict[str, Any] = {"train_jobs": len(train), "test_jobs": len(test), "features": list(table.x.columns)}
    rows: dict[str, Any] = {}

    def timed(name: str, fit: Any) -> Any:
        started = time.perf_counter()
        model = fit()
        rows[name] = {**regression_metrics(model.predict(xte), yte), "fit_s": round(time.perf_counter() - started, 1)}
        rows[name]["complexity"] = model.complexity()
        return model

    pram = timed("PrAM", lambda: PrAMRegressor(outer_bags=2, feature_types=types).fit(xtr, ytr))
    timed("PrDT", lambda: PrDTRegressor(min_samples_leaf=5, ccp_alpha=1e-3).fit(xtr, ytr))
    started = time.perf_counter()
    chosen = select_model(xtr, ytr, n_trials=trials, feature_types=types, pram_params={"outer_bags": 2})
    rows["Primo auto"] = {
        **regression_metrics(chosen.model.predict(xte), yte),
        "fit_s": round(time.perf_counter() - started, 1),
        "complexity": chosen.complexity,
    }
    out["selection"] = chosen.summary()
    started = time.perf_counter()
    rows["LightGBM"] = {**regression_metrics(lightgbm_log(table, train, test), yte)}
    rows["LightGBM"]["fit_s"] = round(time.perf_counter() - started, 1)
    started = time.perf_counter()
    rows["rolling (P_R)"] = {**regression_metrics(rolling_log(workload, table.x.index, train, test), yte)}
    rows["rolling (P_R)"]["fit_s"] = round(time.perf_counter() - started, 1)
    if "gpus" in table.x.columns:
        before = rows["PrAM"]["r2_log"]
        pram.monotonize("gpus")
        after = regression_metrics(pram.predict(xte), yte)
        out["monotone_gpus"] = {"r2_before": before, "r2_after": after["r2_log"], "mae_after": after["mae_log"]}
    out["models"] = rows
    print(f"\n== {label}: {len(train):,} training jobs, {len(test):,} test jobs; features {out['features']}")
    print(f"{'model':<16}{'MAE log1p-s':>12}{'MAE h':>9}{'R^2':>8}{'complexity':>12}{'fit s':>8}")
    for name, r in rows.items():
        c = r.get("complexity")
        print(
            f"{name:<16}{r['mae_log']:>12.3f}{r['mae_hours']:>9.2f}{r['r2_log']:>8.3f}"
            f"{'' if c is None else f'{c:.0f}':>12}{r['fit_s']:>8}"
        )
    print("selection:", json.dumps(out["selection"]))
    if "monotone_gpus" in out:
        print("monotone gpus:", json.dumps(out["monotone_gpus"]))
    return out


def prdt_search_figures(label: str, workload: Any, epoch: float, trials: int) -> dict[str, Any]:
    table = duration_table(workload, epoch)
    train, test = time_split(table, 0.2)
    xtr, ytr, xte, yte = table.x.iloc[train], table.y[train], table.x.iloc[test], table.y[test]
    out: dict[str, Any] = {}
    print(f"\n== {label}: PrDT-only search, {trials} trials")
    for name, limits in (("grow, prune (source)", False), ("limits + prune (ours)", True)):
        started = time.perf_counter()
        chosen = select_model(xtr, ytr, n_trials=trials, kinds=("prdt",), prdt_limits=limits)
        row = {**regression_metrics(chosen.model.predict(xte), yte), "complexity": chosen.complexity,
               "validation_score": chosen.score, "params": chosen.params,
               "search_s": round(time.perf_counter() - started, 1)}
        out[name] = row
        print(f"{name:<24} MAE log1p-s {row['mae_log']:.3f}  R^2 {row['r2_log']:.3f}  complexity "
              f"{row['complexity']:.0f}  score {row['validation_score']:.4f}  {json.dumps(row['params'])}")
    return out


def ces_figures() -> dict[str, Any]:
    from shapeshift.energy.replay import read_node_series, run_replay

    series = read_node_series(datasets.locate("philly-node-sequence"))
    out = {}
    for forecaster in ("lightgbm", "primo"):
        started = time.perf_counter()
        f = run_replay(series, forecaster=forecaster).summary["forecast"]
        out[forecaster] = {
            "smape_pct": f[f"smape_{forecaster}_pct"],
            "seasonal_naive_pct": f["smape_seasonal_naive_pct"],
            "seconds": round(time.perf_counter() - started, 1),
        }
    print("\n== CES forecast SMAPE on the 14 held-out Philly days:", json.dumps(out))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("helios", "philly", "ces", "prdt", "all"), default="all")
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--jobs", type=int, default=20000)
    args = parser.parse_args()
    if args.part in ("helios", "all"):
        path = Path("/tmp") / f"primo_helios_like_{args.jobs}.csv"
        helios_like(args.jobs).to_csv(path, index=False)
        duration_figures("generated Helios-schema trace", read_workload(path, "helios"), 0.0, args.trials)
    if args.part in ("philly", "all"):
        philly = datasets.locate("philly")
        first = pd.to_datetime(pd.read_csv(philly, usecols=["timestamp"])["timestamp"]).min()
        epoch = first.tz_localize("UTC").timestamp()
        duration_figures("Philly", read_workload(philly), epoch, args.trials)
    if args.part in ("ces", "all"):
        ces_figures()
    if args.part == "prdt":
        path = Path("/tmp") / f"primo_helios_like_{args.jobs}.csv"
        helios_like(args.jobs).to_csv(path, index=False)
        prdt_search_figures("generated Helios-schema trace", read_workload(path, "helios"), 0.0, args.trials)
        philly = datasets.locate("philly")
        first = pd.to_datetime(pd.read_csv(philly, usecols=["timestamp"])["timestamp"]).min()
        prdt_search_figures("Philly", read_workload(philly), first.tz_localize("UTC").timestamp(), args.trials)


if __name__ == "__main__":
    main()
