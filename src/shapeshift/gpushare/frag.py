"""The target workload (typical pods) and the paper's fragmentation measure F_n(M).

Follows hkust-adsl/kubernetes-scheduler-simulator (commit in ``gpushare.REFERENCE_COMMIT``):

* ``typical_pods``: ``GetTypicalPods`` in pkg/utils/frag.go. Pods of the *original* trace
  (before the fill's resampling, ``SetTypicalPods`` in pkg/simulator/analysis.go) are
  grouped by shape (CPU milli as the scheduler counts it, GPU milli per GPU, GPU count,
  GPU-model constraint string; memory is not part of a shape); shapes sorted by count,
  most common first (ties: the larger shape first, ``TargetPodList.Less`` reversed in
  pkg/type/resource.go); the most common shapes are taken one at a time until they cover
  at least ``threshold`` percent (95, ``podPopularityThreshold`` in
  scripts/generate_config_and_run.py) of the pods; their frequencies are renormalised to 1.
  CPU-only pods are included (``isInvolvedCpuPods: true``).
* ``node_frag``: ``NodeGpuShareFragAmount`` + ``FragAmountSumExceptQ3`` in pkg/utils/frag.go.
  For each typical pod m with frequency p: if m asks for no GPU, or the node's model is
  excluded by m, or m does not fit the node's CPU or GPUs, all the node's idle GPU milli
  counts as fragment (p x idle); otherwise the idle milli on GPUs that each have less than
  m's per-GPU milli left counts (p x sum). F_n(M) = sum over m. (The reference also counts
  the idle GPUs of the "CPU-only pod fits" class as fragment; kept, it shifts every node
  of the same idle amount equally.)

Both are vectorised: ``node_frag`` evaluates many (hypothetical) node states at once, one
numpy pass per distinct per-GPU milli among the typical pods.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from shapeshift.gpushare.openb import MILLI, PodList

#: ``DefaultMilliCPURequest`` of the Kubernetes scheduler: a container asking for no CPU
#: counts as 100 milli in scoring (``GetNonzeroRequests``, used by ``GetPodResource`` in
#: pkg/utils/utils.go).
NONZERO_CPU_MILLI = 100


def scoring_cpu(cpu_milli: np.ndarray) -> np.ndarray:
    """CPU milli as the reference's scorers see it (0 counts as 100)."""
    return np.where(cpu_milli == 0, NONZERO_CPU_MILLI, cpu_milli)


@dataclass(frozen=True, eq=False)
class TypicalPods:
    """The target workload: shapes and their renormalised frequencies, most common first."""

    cpu: np.ndarray  # int64, scoring CPU milli
    milli: np.ndarray  # int64, per-GPU milli (0 = no GPU)
    num: np.ndarray  # int64, GPU count
    spec: tuple[str, ...]  # GPU-model constraint ("" = any)
    count: np.ndarray  # int64, pods of each shape in the trace
    covered: int  # pods the chosen shapes cover (the renormalisation divisor)

    @property
    def freq(self) -> np.ndarray:
        """Renormalised frequency of each shape (sums to 1)."""
        return self.count / self.covered

    def __len__(self) -> int:
        return len(self.freq)

    def access(self, models: tuple[str, ...]) -> np.ndarray:
        """(shapes, models) bool: may shape t use a GPU of model k (``IsNodeAccessibleToPodByType``)."""
        out = np.ones((len(self), len(models)), dtype=bool)
        for t, spec in enumerate(self.spec):
            allowed = {p for p in spec.split("|") if p}
            if allowed:
                out[t] = [m in allowed for m in models]
        return out


def typical_pods(pods: PodList, threshold: float = 95.0, include_cpu_pods: bool = True) -> TypicalPods:
    """The reference's typical-pod set of ``pods`` (``GetTypicalPods``, pkg/utils/frag.go)."""
    cpu = scoring_cpu(pods.cpu_milli)
    counts: Counter[tuple[int, int, int, str]] = Counter()
    for i in range(len(pods)):
        if not include_cpu_pods and pods.num_gpu[i] == 0:
            continue
        counts[(int(cpu[i]), int(pods.gpu_milli[i]), int(pods.num_gpu[i]), pods.gpu_spec[i])] += 1
    return typical_of_counts(counts, threshold)


def typical_of_counts(counts: Counter[tuple[int, int, int, str]], threshold: float = 95.0) -> TypicalPods:
    """The typical-pod set of pods counted by shape ``(scoring CPU milli, milli per GPU,
    GPUs, gpu_spec)``, by ``GetTypicalPods``'s coverage rule (see ``typical_pods``)."""
    if not counts:
        raise ValueError("no pods to estimate the target workload from")
    total = sum(counts.values())
    # Descending by count, then by shape (cpu, milli, num, spec) descending.
    ordered = sorted(counts.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
    expected = threshold * total / 100.0
    chosen, cum = [], 0
    for shape, n in ordered:
        if cum >= expected:
            break
        chosen.append((shape, n))
        cum += n
    return TypicalPods(
        cpu=np.array([s[0] for s, _ in chosen], np.int64),
        milli=np.array([s[1] for s, _ in chosen], np.int64),
        num=np.array([s[2] for s, _ in chosen], np.int64),
        spec=tuple(s[3] for s, _ in chosen),
        count=np.array([n for _, n in chosen], np.int64),
        covered=cum,
    )


class FragMeasure:
    """F_n(M) of node states against a fixed target workload on a fixed list of GPU models."""

    def __init__(self, typical: TypicalPods, models: tuple[str, ...]):
        self.typical = typical
        gpu = typical.milli > 0
        # Integer weights (pod counts): sums are exact, so a placement that changes no
        # pod's class gives exactly zero change, as the reference's identical sums do.
        self._weight_sum = int(typical.count.sum())
        self._norm = float(typical.covered)
        self._thresholds = np.array(sorted({int(x) for x in typical.milli[gpu]}), dtype=np.int64)
        # Per GPU-asking typical pod: which threshold column, GPU count, CPU, frequency, access.
        self._col = np.searchsorted(self._thresholds, typical.milli[gpu])
        self._num = typical.num[gpu]
        self._cpu = typical.cpu[gpu]
        self._weight = typical.count[gpu]
        self._access_t = typical.access(models)[gpu].T.copy()  # (K, T)
        # The same, as Python values, for one node at a time (``one``): cheaper than numpy's
        # per-call overhead when a single node changes.
        self._threshold_list = self._thresholds.tolist()
        self._pod_rows = [
            (int(c), int(n), int(cpu), int(w), self._access_t[:, t].tolist())
            for t, (c, n, cpu, w) in enumerate(zip(self._col, self._num, self._cpu, self._weight, strict=True))
        ]

    def __call__(self, cpu_left: np.ndarray, left: np.ndarray, model: np.ndarray) -> np.ndarray:
        """Fragment milli of each state: ``cpu_left`` (H,), ``left`` (H, G) idle milli per GPU
        (absent GPUs as 0), ``model`` (H,) index into the models list. Returns (H,) float."""
        idle = left.sum(axis=1)
        # Start from "every typical pod sees all idle milli as fragment"; each fitting (Q3)
        # pod then takes back the milli on GPUs big enough for it.
        frag = idle * self._weight_sum
        if not len(self._thresholds):
            return frag / self._norm
        ge = left[:, :, None] >= self._thresholds[None, None, :]  # (H, G, D)
        count = ge.sum(axis=1)  # (H, D) GPUs each threshold fits on
        on_big = (ge * left[:, :, None]).sum(axis=1)  # (H, D) milli on those GPUs
        fits = (
            (count[:, self._col] >= self._num[None, :])
            & (cpu_left[:, None] >= self._cpu[None, :])
            & self._access_t[model]
        )  # (H, T)
        frag -= (fits * on_big[:, self._col]) @ self._weight
        return frag / self._norm

    def one(self, cpu_left: int, left: list[int], model: int) -> float:
        """F_n(M) of one node state; equal to ``__call__`` on that state (integer sums)."""
        idle = sum(left)
        total = idle * self._weight_sum
        count, on_big = [], []
        for m in self._threshold_list:
            c = b = 0
            for x in left:
                if x >= m:
                    c += 1
                    b += x
            count.append(c)
            on_big.append(b)
        for col, num, cpu, weight, access in self._pod_rows:
            if access[model] and cpu_left >= cpu and count[col] >= num:
                total -= weight * on_big[col]
        return total / self._norm


def node_frag_reference(cpu_left: int, left: list[int], model: str, typical: TypicalPods) -> float:
    """One node's F_n(M), written the way the reference loops (for tests of the vectorised form)."""
    idle = float(sum(left))
    total = 0.0
    for t in range(len(typical)):
        p, m, g, c = float(typical.freq[t]), int(typical.milli[t]), int(typical.num[t]), int(typical.cpu[t])
        allowed = {x for x in typical.spec[t].split("|") if x}
        if m == 0 or (allowed and model not in allowed):
            total += p * idle
            continue
        fits = sum(1 for x in left if x >= m) >= g and cpu_left >= c
        total += p * (sum(x for x in left if x < m) if fits else idle)
    return total


__all__ = [
    "MILLI",
    "FragMeasure",
    "TypicalPods",
    "node_frag_reference",
    "scoring_cpu",
    "typical_of_counts",
    "typical_pods",
]
