"""Sia's integer program as the artifact hands it to CBC (``sia_mip``), and the choice of
solver (``solver``)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from shapeshift.policies.framework.base import PolicyError
from shapeshift.policies.goodput import sia as sia_module
from shapeshift.policies.goodput.sia import SiaParams, SiaPolicy
from shapeshift.policies.goodput.sia_mip import artifact_grid, cbc_available, solve_cbc, standard_form

needs_cbc = pytest.mark.skipif(not cbc_available(), reason="cylp (the cbc extra) is not installed")

# The artifact's default cluster: 6 x 4 `aws`, 2 x 8 `dgx-ext`, 3 x 8 `rtx`.
TYPES = {"aws": (4, 6), "dgx-ext": (8, 2), "rtx": (8, 3)}
CAPS = [24.0, 16.0, 24.0]


def test_the_artifacts_columns_are_type_by_type_fewest_gpus_first():
    # CONFIGS_4GPU up to 6 nodes: 1, 2, 4, then 2..6 whole nodes; CONFIGS_8GPU up to 2 and
    # 3 nodes: 1, 2, 4, 8, then whole nodes. A rigid 3-GPU request on `aws` comes after
    # that type's own columns.
    grid = artifact_grid(TYPES, [("aws", 3), ("rtx", 8)])
    assert grid == [
        *[("aws", g) for g in (1, 2, 4, 8, 12, 16, 20, 24, 3)],
        *[("dgx-ext", g) for g in (1, 2, 4, 8, 16)],
        *[("rtx", g) for g in (1, 2, 4, 8, 16, 24)],
    ]


def test_the_standard_form_is_cvxpys_layout_of_the_artifacts_program():
    # 2 jobs x 3 configurations (type 0: 1 and 2 GPUs, type 1: 1 GPU), caps 2 and 1; job 1
    # is pinned to configuration 2. cvxpy flattens X (jobs x configs) column by column, so
    # variable v = k * 2 + j: x0 = (j0, k0), x1 = (j1, k0), x2 = (j0, k1), x3 = (j1, k1),
    # x4 = (j0, k2), x5 = (j1, k2).
    costs = np.array([[0.1, 0.2, 0.3], [1.1, 1.2, 1.3]])
    c, a_eq, b_eq, a_le, b_le = standard_form(costs, [1, 2, 1], [0, 0, 1], [2.0, 1.0], [None, 2], [False, True])
    assert c.tolist() == [0.1, 1.1, 0.2, 1.2, 0.3, 1.3]
    # Equalities first: x5 = 1 (job 1 on its current configuration 2).
    assert a_eq.toarray().tolist() == [[0, 0, 0, 0, 0, 1]]
    assert b_eq.tolist() == [1.0]
    a = a_le.toarray()
    # -x <= 0 (6 rows), x <= 1 (6 rows).
    assert a[:6].tolist() == (-np.eye(6)).tolist() and b_le[:6].tolist() == [0.0] * 6
    assert a[6:12].tolist() == np.eye(6).tolist() and b_le[6:12].tolist() == [1.0] * 6
    # GPUs per type <= cap: type 0 has x0..x3 (1, 1, 2, 2 GPUs), type 1 x4, x5 (1 GPU each).
    assert a[12:14].tolist() == [[1, 1, 2, 2, 0, 0], [0, 0, 0, 0, 1, 1]] and b_le[12:14].tolist() == [2.0, 1.0]
    # then -GPUs per type <= 0.
    assert a[14:16].tolist() == [[-1, -1, -2, -2, 0, 0], [0, 0, 0, 0, -1, -1]] and b_le[14:16].tolist() == [0.0, 0.0]
    # one configuration per job: job 0 on x0, x2, x4; job 1 on x1, x3, x5.
    assert a[16:].tolist() == [[1, 0, 1, 0, 1, 0], [0, 1, 0, 1, 0, 1]] and b_le[16:].tolist() == [1.0, 1.0]


def _artifact_costs(jobs: list[tuple[float, int | None, dict[tuple[str, int], float]]]) -> np.ndarray:
    """Costs on the artifact's 19 columns: each job's logged costs (round(g^-0.5, 2) - 1.1),
    every other column at goodput 1e-4 (``ZERO_ALLOC_GAIN``), times the job's restart
    factor when it holds a configuration: round((1e-4 f)^-0.5, 2) - 1.1."""
    grid = artifact_grid(TYPES, [])
    rows = []
    for factor, current, logged in jobs:
        f = factor if current is not None else 1.0
        filler = min(round((1e-4 * f) ** -0.5, 2), 3000.0) - 1.1
        rows.append([logged.get(col, filler) for col in grid])
    return np.array(rows)


def _solve(costs, current, pinned=None):
    grid = artifact_grid(TYPES, [])
    gpus, kinds = [g for _, g in grid], [list(TYPES).index(t) for t, _ in grid]
    picked = solve_cbc(costs, gpus, kinds, CAPS, current, pinned or [False] * len(current), 10.0)
    return [None if k is None else grid[k] for k in picked]


NEW = {("aws", 1): -0.1, ("dgx-ext", 1): -0.1, ("rtx", 1): -0.1}


@needs_cbc
def test_a_lone_new_job_goes_where_the_artifacts_cbc_put_it():
    # A new job is worth 1 on one GPU of every type: three optima (-0.1 each). No rule
    # stated by hand decides among them; the expectation is the instrumented artifact's own
    # decision (Saturn workload-1, 420 s, cifar10-0 alone: an `rtx` GPU; HiGHS takes `aws`).
    assert _solve(_artifact_costs([(1.0, None, NEW)]), [None]) == [("rtx", 1)]


@needs_cbc
def test_two_new_jobs_beside_two_running_ones_go_where_the_artifacts_cbc_put_them():
    # Saturn workload-2 at 240 s (the artifact's log): bert-0 and cifar10-1 on 2 A100s each
    # (restart factors 0.111 and 0.645), cifar10-2 and cifar10-3 new. The artifact's CBC
    # kept both running jobs and put both new ones on `aws` (HiGHS put them on `rtx`).
    bert = {("aws", 1): 1.9, ("aws", 2): 1.22, ("aws", 4): 0.68, ("dgx-ext", 1): -0.19, ("dgx-ext", 2): -0.86}
    bert |= {("dgx-ext", 4): -0.56, ("rtx", 1): 0.41, ("rtx", 2): -0.02, ("rtx", 4): -0.31}
    cifar = {("aws", 1): 0.15, ("aws", 2): -0.06, ("aws", 4): -0.2, ("dgx-ext", 1): -0.63, ("dgx-ext", 2): -0.78}
    cifar |= {("dgx-ext", 4): -0.76, ("rtx", 1): -0.44, ("rtx", 2): -0.55, ("rtx", 4): -0.63}
    held = artifact_grid(TYPES, []).index(("dgx-ext", 2))
    costs = _artifact_costs([(0.1111, held, bert), (0.6450, held, cifar), (0.5238, None, NEW), (1.0, None, NEW)])
    assert _solve(costs, [held, held, None, None]) == [("dgx-ext", 2), ("dgx-ext", 2), ("aws", 1), ("aws", 1)]


@needs_cbc
def test_cbc_holds_a_pinned_job_to_its_configuration():
    # One job on 2 A100s, restoring (pinned): its 8-A100 option costs less (-0.9 < -0.5)
    # but the equality x = 1 holds it where it is.
    logged = {("dgx-ext", 2): -0.5, ("dgx-ext", 8): -0.9}
    held = artifact_grid(TYPES, []).index(("dgx-ext", 2))
    assert _solve(_artifact_costs([(1.0, held, logged)]), [held]) == [("dgx-ext", 8)]
    assert _solve(_artifact_costs([(1.0, held, logged)]), [held], [True]) == [("dgx-ext", 2)]


def _policy(solver: str) -> SiaPolicy:
    return SiaPolicy(SiaParams(solver=solver), SiaParams().knowledge())


def test_without_cylp_auto_warns_and_uses_highs_and_cbc_refuses(monkeypatch):
    monkeypatch.setattr(sia_module, "cbc_available", lambda: False)
    with pytest.warns(UserWarning, match="cylp is not installed"):
        assert _policy("auto")._use_cbc() is False
    with pytest.raises(PolicyError, match="solver=cbc needs cylp"):
        _policy("cbc")._use_cbc()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _policy("highs")._use_cbc() is False


def test_with_cylp_auto_and_cbc_use_it_and_highs_does_not(monkeypatch):
    monkeypatch.setattr(sia_module, "cbc_available", lambda: True)
    assert _policy("auto")._use_cbc() is True
    assert _policy("cbc")._use_cbc() is True
    assert _policy("highs")._use_cbc() is False


def test_cbcs_costs_are_rounded_in_float32_as_the_artifacts_matrix():
    # A job with goodputs 1 and 2 (normalised: 1 and 2), no GPUs: round(1^-0.5, 2) = 1 and
    # round(2^-0.5, 2) = round(0.7071, 2) = 0.71, minus lambda_n = 1.1. The artifact's
    # goodput matrix is float32, so 0.71 is float32's 0.709999978..., not float64's 0.71.
    from shapeshift.model import JobSpec
    from shapeshift.policies.goodput.sia import _Job, _Option

    policy = _policy("highs")
    job = _Job("j", JobSpec("j", 0.0, 1, duration=60.0), "pollux", [_Option("t", 1, 1, 1.0), _Option("t", 1, 2, 2.0)])
    good = np.array([1.0, 2.0])
    assert policy.costs(None, job, good, None, np.float32).tolist() == [1.0 - 1.1, float(np.float32(0.71)) - 1.1]
    assert policy.costs(None, job, good, None).tolist() == [1.0 - 1.1, 0.71 - 1.1]
