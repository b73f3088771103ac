"""How closely a replay's job starts agree with a record (or another run).

Differences are ``replay start - recorded start`` in seconds, over the jobs both
started. ``same_order_share`` looks at neighbours: jobs sorted by recorded start, each
pair of consecutive jobs with different recorded starts counts as in order when the
replay does not start the later one first (ties in the replay count as in order). It
is O(n log n), so it also serves million-job histories.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

#: The tolerances reported (seconds): 5 s is about how closely two real Slurm runs of
#: the same trace agree; 60 s is the one-minute granularity of limits and priorities.
TOLERANCES = (5, 60)


def agreement(recorded: Mapping[str, float], replay: Mapping[str, float]) -> dict[str, Any]:
    """The agreement figures of the module docstring for two ``job -> start`` maps."""
    common = sorted(j for j in recorded if j in replay and math.isfinite(recorded[j]) and math.isfinite(replay[j]))
    result: dict[str, Any] = {"jobs_compared": len(common), "jobs_only_recorded": len(recorded) - len(common)}
    if not common:
        return result
    rec = np.array([recorded[j] for j in common], dtype=float)
    rep = np.array([replay[j] for j in common], dtype=float)
    diff = rep - rec
    gap = np.abs(diff)
    for tolerance in TOLERANCES:
        result[f"within_{tolerance}s"] = round(float((gap <= tolerance).mean()), 6)
    result["median_abs_diff_s"] = round(float(np.median(gap)), 3)
    result["p90_abs_diff_s"] = round(float(np.percentile(gap, 90)), 3)
    result["max_abs_diff_s"] = round(float(gap.max()), 3)
    result["mean_diff_s"] = round(float(diff.mean()), 3)
    result["replay_earlier_share"] = round(float((diff < -TOLERANCES[0]).mean()), 6)
    result["replay_later_share"] = round(float((diff > TOLERANCES[0]).mean()), 6)
    order = np.argsort(rec, kind="stable")
    rec_sorted, rep_sorted = rec[order], rep[order]
    distinct = np.diff(rec_sorted) > 0
    pairs = int(distinct.sum())
    kept = int(((np.diff(rep_sorted) >= 0) & distinct).sum())
    result["same_order_share"] = round(kept / pairs, 6) if pairs else 1.0
    return result
