"""The Pollux/AdaptDL evaluation workloads, with run lengths from the artifact's profiles."""

from __future__ import annotations

import functools
import json
from importlib import resources
from pathlib import Path

import pandas as pd

from shapeshift.model import BatchSpec
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


def read_pollux(path: str | Path) -> Workload:
    """The Pollux/AdaptDL evaluation workloads (``workload-N.csv``): ``name, time,
    application, num_replicas, batch_size``.

    The file has no durations: Pollux trains every job to the end of its application's
    training trace. Each job gets ``iterations`` (steps to that point at its batch size)
    and ``duration`` (those steps at the measured step time of its replicas packed 4 per
    node) from ``shapeshift/data/pollux_reference.json`` (derived from the artifact's
    profiles, see ``scripts/derive_pollux_reference.py``), so the jobs replay with the
    duration-based throughput model. ``num_replicas`` -> ``num_gpus``; ``application`` ->
    ``model`` as ``pollux/<application>``; ``batch_size`` -> the job's batch (adaptive
    between the application's initial and largest validated batch, except NCF), which
    the ``pollux`` throughput model and goodput policies use. A combination without a
    reference row is an error naming the ones known for that application.
    """
    table = load_table(path)
    table.require(POLLUX_COLUMNS, "pollux")
    ids = table.present("name").astype(str).str.strip()
    table.unique_ids(ids, "name")
    apps = table.present("application").astype(str).str.strip()
    replicas = table.numeric("num_replicas", integer=True, minimum=1).astype("int64")
    batch = table.numeric("batch_size", integer=True, minimum=1).astype("int64")
    reference = pollux_reference()
    limits = {app: info["batch"] for app, info in reference.items()}
    lookup = {
        (app, c["replicas"], c["batch_size"]): (c["iterations"], c["duration_s"])
        for app, info in reference.items()
        for c in info["configs"]
    }
    iterations, durations, batches = [], [], []
    for row, key in enumerate(zip(apps.tolist(), replicas.tolist(), batch.tolist(), strict=True)):
        found = lookup.get(key)
        if found is None:
            app, r, b = key
            if app not in reference:
                raise table.fail(
                    row, "application", f"unknown application {app!r}; known: {', '.join(sorted(reference))}"
                )
            known = sorted({(c["replicas"], c["batch_size"]) for c in reference[app]["configs"]})
            shown = ", ".join(f"{kr}x{kb}" for kr, kb in known[:12])
            raise table.fail(
                row,
                "num_replicas",
                f"no reference run length for {app} with {r} replicas at batch size {b}; "
                f"known replicas x batch: {shown}{', ...' if len(known) > 12 else ''}",
            )
        iterations.append(found[0])
        durations.append(found[1])
        app, _, size = key
        lim = limits[app]
        # Pollux adapts every job's batch except NCF's, which its simulator pins at 32768
        # (simulator/simulator.py, Cluster.__init__).
        spec = BatchSpec(size, lim["initial"], lim["max"], lim["min_local"], lim["max_local"], adaptive=app != "ncf")
        batches.append(str(spec))
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


