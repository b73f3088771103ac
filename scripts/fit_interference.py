"""Fit the default interference model to the Lucid artifact's measured co-location speeds.

Usage (the artifact is not part of this repository; fetch S-Lab-System-Group/Lucid):

    python scripts/fit_interference.py LUCID/simulation/analyzer/single_data.csv \\
        LUCID/simulation/data/colocate_info.csv

Prints alpha, beta and the RMSE of ``speed_a = 1 / (1 + alpha u_a u_b + beta m_a m_b)``
over every directed pair whose two jobs have a single-job profile, beside the RMSE of a
constant. ``shapeshift.perf.colocation`` carries the rounded result.
"""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
from scipy.optimize import least_squares


def main(single_path: str, pairs_path: str) -> None:
    single = pd.read_csv(single_path).set_index(["model", "dataset", "batchsize", "amp"])
    pairs = pd.read_csv(pairs_path, index_col=0)
    rows = []
    for _, r in pairs.iterrows():
        one = (r.model1, r.dataset1, r.batchsize1, r.amp1)
        two = (r.model2, r.dataset2, r.batchsize2, r.amp2)
        if one in single.index and two in single.index:
            a, b = single.loc[one], single.loc[two]
            rows.append((a.gpu_util, a.gmem_util, b.gpu_util, b.gmem_util, r.speed1))
            rows.append((b.gpu_util, b.gmem_util, a.gpu_util, a.gmem_util, r.speed2))
    data = np.array(rows, dtype=float)
    ua, ma, ub, mb, speed = data[:, 0] / 100, data[:, 1] / 100, data[:, 2] / 100, data[:, 3] / 100, data[:, 4]

    def model(p: np.ndarray) -> np.ndarray:
        return 1.0 / (1.0 + p[0] * ua * ub + p[1] * ma * mb)

    fit = least_squares(lambda p: model(p) - speed, [0.3, 0.3])
    rmse = float(np.sqrt(np.mean(fit.fun**2)))
    print(f"pairs={len(data)} alpha={fit.x[0]:.3f} beta={fit.x[1]:.3f} rmse={rmse:.4f} constant_rmse={speed.std():.4f}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
