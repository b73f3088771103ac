"""Gavel's throughputs for Pollux jobs from per-GPU-type profiles.

The Sia artifact runs Gavel as a heterogeneity-aware baseline with each job's throughput
on each GPU type read from that type's profile at the job's own GPU count and batch
(``sia-simulator/gavel.py``, ``predict_xput``); ``gavel``'s ``profiles`` parameter does
the same (:func:`shapeshift.perf.pollux.reference.fixed_batch_throughput`).
"""

from __future__ import annotations

from shapeshift.model import JobSpec


def profiles_root(name: str | None) -> str | None:
    """The resolved profiles directory for ``profiles`` (a path or data set name)."""
    if name is None:
        return None
    from shapeshift.datasets import locate
    from shapeshift.errors import InputError

    found = locate(name)
    if not found.is_dir():
        raise InputError(f"Pollux profiles directory {name} not found", field="profiles")
    return str(found.resolve())


def profiled_speed(root: str, spec: JobSpec, gpu_type: str, per_node: int) -> float | None:
    """Steps/s of a Pollux job on ``gpu_type`` at its GPU count and batch (the artifact's
    ``predict_xput`` unit, which ``max_sum_throughput_perf`` adds up; the max-min objective
    is indifferent to a per-job unit); None for jobs the profiles do not cover."""
    from shapeshift.perf.pollux.profiles import app_name, load_profiles
    from shapeshift.perf.pollux.reference import fixed_batch_throughput

    app = app_name(spec.model)
    if spec.batch is None or app not in load_profiles(root):
        return None
    size = spec.batch.size
    return fixed_batch_throughput(root, app, gpu_type, spec.num_gpus, per_node, size) / size
