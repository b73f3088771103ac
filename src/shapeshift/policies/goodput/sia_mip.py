"""Sia's integer program on a cluster of several GPU types, solved with HiGHS.

One binary variable per (job, configuration): at most one configuration per job, the
GPUs of each type within the type's total, a job in the middle of a checkpoint-restore
held to its current configuration; minimise the sum of the chosen costs (the artifact's
``sia.py``, ``__solve_mip_rescaled``, there with CBC through cvxpy at a relative gap of
1e-4, the gap used here).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np


def solve_mip(
    jobs: Sequence[Any], costs: Sequence[np.ndarray], caps: Mapping[str, float], time_limit: float
) -> dict[str, Any]:
    """The chosen option per job id (absent: no GPUs). Each job has ``job_id``, ``options``
    (each with ``gpu_type`` and ``gpus``), ``current`` and ``pinned``; ``costs[i]`` holds
    one cost per option of ``jobs[i]``; ``caps``: GPUs per type."""
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import coo_array

    cost: list[float] = []
    var_job: list[int] = []
    var_opt: list[Any] = []
    lower: list[float] = []
    for i, (job, job_costs) in enumerate(zip(jobs, costs, strict=True)):
        for k, (option, c) in enumerate(zip(job.options, job_costs, strict=True)):
            cost.append(float(c))
            var_job.append(i)
            var_opt.append(option)
            lower.append(1.0 if job.pinned and k == job.current else 0.0)
    if not cost:
        return {}
    n = len(cost)
    a_job = coo_array((np.ones(n), (var_job, np.arange(n))), shape=(len(jobs), n)).tocsr()
    type_names = sorted(caps)
    rows = [type_names.index(o.gpu_type) for o in var_opt]
    a_gpu = coo_array(([float(o.gpus) for o in var_opt], (rows, np.arange(n))), shape=(len(type_names), n)).tocsr()
    res = milp(
        np.array(cost),
        constraints=[LinearConstraint(a_job, 0, 1), LinearConstraint(a_gpu, 0, [caps[t] for t in type_names])],
        integrality=np.ones(n),
        bounds=Bounds(np.array(lower), 1),
        options={"time_limit": time_limit, "mip_rel_gap": 1e-4},
    )
    chosen: dict[str, Any] = {}
    if res.x is not None:
        for v in np.flatnonzero(res.x > 0.5):
            chosen[jobs[var_job[v]].job_id] = var_opt[v]
    return chosen
