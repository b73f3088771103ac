"""The Pollux/AdaptDL evaluation workloads, with run lengths from the artifact's profiles."""

from __future__ import annotations

import functools
import json
from importlib import resources
from pathlib import Path

import pandas as pd

from shapeshift.workloads.readers.table import load_table
from shapeshift.workloads.workload import Workload

POLLUX_COLUMNS = ("name", "time", "application", "num_replicas", "batch_size")
#: Model names of Pollux jobs live in their own namespace (``pollux/bert`` is not the
#: Rubick catalog's ``bert``); the same prefix as ``shapeshift.perf.pollux.profiles``.
NAMESPACE = "pollux/"


@functools.cache
def pollux_reference() -> dict[str, dict]:
    """Reference iterations and run time per (application, replicas, batch size), derived
    from the Pollux artifact's profiles by ``scripts/derive_pollux_reference.py``."""
    text = resources.files("shapeshift").joinpath("data/pollux_reference.json").read_text()
    return json.loads(text)["applications"]


def read_pollux(path: str | Path, profiles: str | Path | None = None) -> Workload:
    """The Pollux/AdaptDL evaluation workloads (``workload-N.csv``, and the Sia artifact's
    ``workloads/*/workload-N.csv`` as they are): ``name, time, application, num_replicas,
    batch_size``; other columns are ignored.

    The file has no durations: Pollux trains every job to the end of its application's
    training trace. Each job gets ``iterations`` and ``duration`` at its own replicas and
    batch, computed from the application's profile (:mod:`shapeshift.perf.pollux.reference`;
    the bundled ``pollux-profiles`` unless ``profiles`` names another directory), so the
    jobs also replay with the duration-based throughput models. ``num_replicas`` ->
    ``num_gpus``; ``application`` -> ``model`` as ``pollux/<application>``; ``batch_size``
    -> the job's batch (adaptive between the application's initial and largest validated
    batch, except NCF), which the ``pollux`` throughput model and goodput policies use. An
    unknown application or a batch outside the validated range is an error naming the row.
    """
    from shapeshift.datasets import locate
    from shapeshift.perf.pollux.profiles import load_profiles
    from shapeshift.perf.pollux.reference import batch_spec, run_length

    table = load_table(path)
    table.require(POLLUX_COLUMNS, "pollux")
    ids = table.present("name").astype(str).str.strip()
    table.unique_ids(ids, "name")
    apps = table.present("application").astype(str).str.strip()
    replicas = table.numeric("num_replicas", integer=True, minimum=1).astype("int64")
    batch = table.numeric("batch_size", integer=True, minimum=1).astype("int64")
    root = str(locate(str(profiles) if profiles else "pollux-profiles").resolve())
    known = load_profiles(root)
    iterations, durations, batches = [], [], []
    for row, (app, r, b) in enumerate(zip(apps.tolist(), replicas.tolist(), batch.tolist(), strict=True)):
        profile = known.get(app)
        if profile is None:
            raise table.fail(row, "application", f"unknown application {app!r}; known: {', '.join(sorted(known))}")
        if not profile.init_batch <= b <= profile.max_batch:
            raise table.fail(
                row,
                "batch_size",
                f"{app} batch size {b} is outside its validated range {profile.init_batch}..{profile.max_batch}",
            )
        steps, seconds = run_length(root, app, int(r), int(b))
        iterations.append(steps)
        durations.append(round(seconds, 1))
        batches.append(str(batch_spec(profile, int(b))))
    out = pd.DataFrame(
        {
            "job_id": ids,
            "submit_time": table.times("time"),
            "num_gpus": replicas,
            "duration": pd.Series(durations, dtype=float),
            "name": ids,
            "model": NAMESPACE + apps,
            "iterations": pd.Series(iterations, dtype="Int64"),
            "batch": batches,
        }
    )
    return Workload.from_frame(Path(path).stem, out)
