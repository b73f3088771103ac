"""Aggregating repeated runs (seeds): the mean and a 95% confidence interval.

The interval is Student's t: mean +/- t(0.975, n - 1) x s / sqrt(n), with s the sample
standard deviation; it is ``None`` for a single run, where no spread can be estimated.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def mean_ci95(values: Sequence[float | None]) -> tuple[float | None, float | None]:
    """(mean, half-width of the 95% interval) of the non-missing ``values``."""
    xs = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    if not xs:
        return None, None
    mean = sum(xs) / len(xs)
    if len(xs) < 2:
        return mean, None
    from scipy.stats import t

    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (len(xs) - 1))
    return mean, float(t.ppf(0.975, len(xs) - 1)) * sd / math.sqrt(len(xs))
