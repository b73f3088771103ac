"""``primo``: job durations from an interpretable model (Primo, Hu's thesis ch. 5).

The same learning set-up as ``gbdt`` (P_M, Helios §5): features known at submission
(user, VC, name bucket, GPUs, CPUs, month, weekday, hour, minute of the submit time),
target ``log1p(duration)``, trained only on jobs that already finished (``observe``),
first at ``min_train`` finished jobs and again every ``retrain_every``, on the latest
``window``; estimates fixed when first asked; P_R before the first model. The model is a
Primo model instead of LightGBM:

* ``model="auto"`` (default): at the first training, ``select_model`` chooses PrAM or
  PrDT and its settings by seeded Bayesian optimisation (``trials`` candidates, the last
  20% of the finished jobs, in end-time order, as validation); later retrains refit the
  chosen kind and settings on the current window. ``"pram"`` / ``"prdt"`` skip the search
  and use that kind's defaults.
* User, VC and name bucket are nominal features for PrAM (an unseen user falls in the
  "unknown" bin, scoring 0); the others continuous.
* ``explanation(job_id)`` gives the top-3 contributions of a job's estimate, recorded
  when the estimate was made (so from the model of that moment), as factors on the
  duration: the model works in log space, so a contribution ``c`` multiplies the
  predicted duration by ``exp(c)``. ``shapeshift simulate --explain`` writes them to
  ``jobs.csv``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from shapeshift.engine.state import JobStatus
from shapeshift.predict.gbdt import FEATURES, GbdtEstimator
from shapeshift.predict.rolling import RollingEstimator

if TYPE_CHECKING:
    import numpy as np

FEATURE_TYPES = ["nominal", "nominal", "nominal", *["continuous"] * (len(FEATURES) - 3)]
NOMINAL = {"user": "user", "vc": "vc", "name_bucket": "name"}


class PrimoEstimator(GbdtEstimator):
    """Duration estimates from a PrAM or PrDT model retrained on finished jobs."""

    name: ClassVar[str] = "primo"

    def __init__(
        self,
        *,
        model: str = "auto",
        trials: int = 12,
        outer_bags: int = 2,
        retrain_every: int = 1000,
        min_train: int = 100,
        window: int = 10000,
        seed: int = 0,
        epoch: float = 0.0,
        fallback: RollingEstimator | None = None,
    ):
        if model not in ("auto", "pram", "prdt"):
            raise ValueError(f"primo: unknown model {model!r}; use auto, pram or prdt")
        if trials < 1 or outer_bags < 1:
            raise ValueError("primo: trials and outer_bags must be >= 1")
        super().__init__(
            retrain_every=retrain_every, min_train=min_train, window=window, seed=seed, epoch=epoch, fallback=fallback
        )
        self.kind = model
        self.trials = trials
        self.outer_bags = outer_bags
        #: The search's summary (``model="auto"``), after the first training.
        self.selection: dict[str, Any] | None = None
        self._chosen: tuple[str, dict[str, Any]] | None = None
        self._explained: dict[str, tuple[float, tuple[str, ...]]] = {}
        self._values: dict[tuple[str, int], str] = {}

    def _code(self, kind: str, value: str) -> int:
        code = super()._code(kind, value)
        self._values.setdefault((kind, code), value)
        return code

    def _require(self) -> None:
        from shapeshift.predict.primo.base import require_explain_extra

        require_explain_extra("interpret")

    def _build(self, kind: str, params: dict[str, Any]) -> Any:
        from shapeshift.predict.primo.pram import PrAMRegressor
        from shapeshift.predict.primo.prdt import PrDTRegressor

        if kind == "pram":
            return PrAMRegressor(
                **{"outer_bags": self.outer_bags, "feature_types": FEATURE_TYPES, "random_state": self.seed, **params}
            )
        return PrDTRegressor(**{"random_state": self.seed, "min_samples_leaf": 5, "ccp_alpha": 1e-3, **params})

    def _fit(self, x: np.ndarray, y: np.ndarray) -> Any:
        import pandas as pd

        frame = pd.DataFrame(x, columns=list(FEATURES))
        if self._chosen is None and self.kind == "auto":
            from shapeshift.predict.primo.select import select_model

            found = select_model(
                frame,
                y,
                n_trials=self.trials,
                seed=self.seed,
                pram_params={"outer_bags": self.outer_bags},
                feature_types=FEATURE_TYPES,
            )
            self._chosen = (found.kind, found.params)
            self.selection = found.summary()
            return found.model
        kind, params = self._chosen or (self.kind, {})
        return self._build(kind, params).fit(frame, y)

    def predict_rows(self, rows: np.ndarray) -> np.ndarray:
        import numpy as np
        import pandas as pd

        return np.maximum(np.expm1(self.model.predict(pd.DataFrame(rows, columns=list(FEATURES)))), 1.0)

    def _describe(self, term: str, row: list[float]) -> str:
        """``user=alice`` for a nominal feature (its original value), ``gpus=8`` otherwise."""
        parts = []
        for feature in term.split(" x "):
            index = FEATURES.index(feature)
            value: Any = row[index]
            kind = NOMINAL.get(feature)
            value = self._values.get((kind, int(value)), "?") if kind is not None else f"{value:g}"
            parts.append(f"{feature}={value}")
        return " & ".join(parts)

    def estimate(self, job: JobStatus) -> float:
        found = self._memo.get(job.job_id)
        if found is not None:
            return found
        if self.model is None:
            found = self._memo[job.job_id] = self.fallback.predict(job)
            self._explained[job.job_id] = (found, ("before the first model: rolling mean",))
            return found
        import pandas as pd

        row = self.features(job)
        local = self.model.explain(pd.DataFrame([row], columns=list(FEATURES)))[0]
        found = self._memo[job.job_id] = max(math.expm1(local.prediction), 1.0)
        top = tuple(f"{self._describe(c.term, row)} x{math.exp(c.value):.3g}" for c in local.top(3))
        self._explained[job.job_id] = (found, top)
        return found

    def explanation(self, job_id: str) -> tuple[float, tuple[str, ...]] | None:
        """``(estimate, top-3 contributions)`` recorded when the job was first estimated."""
        return self._explained.get(job_id)


EXPLAIN_COLUMNS = ("predicted_duration", "explain_1", "explain_2", "explain_3")


@runtime_checkable
class _Composed(Protocol):
    """A policy built from parts (``ComposedPolicy``), named by what is read of it here."""

    @property
    def ordering(self) -> object: ...


@runtime_checkable
class _Estimated(Protocol):
    """An ordering that ranks by an estimator (``EstimatedOrdering``)."""

    @property
    def estimator(self) -> object: ...


def policy_estimator(policy: object) -> PrimoEstimator | None:
    """The ``primo`` estimator a size-based policy orders by, if it has one."""
    ordering = policy.ordering if isinstance(policy, _Composed) else None
    estimator = ordering.estimator if isinstance(ordering, _Estimated) else None
    return estimator if isinstance(estimator, PrimoEstimator) else None


def append_explanations(jobs_csv: Any, policy: Any) -> None:
    """Add each job's predicted duration and its top-3 contributions to ``jobs.csv``.

    Values are those recorded when the policy first estimated the job (its submission);
    a job never estimated (rejected, or never waited) gets empty cells."""
    import csv
    from pathlib import Path

    estimator = policy_estimator(policy)
    path = Path(jobs_csv)
    with path.open(newline="") as handle:
        rows = list(csv.reader(handle))
    header, body = rows[0], rows[1:]
    out = [[*header, *EXPLAIN_COLUMNS]]
    for row in body:
        found = estimator.explanation(row[0]) if estimator is not None else None
        if found is None:
            out.append([*row, "", "", "", ""])
            continue
        estimate, top = found
        cells = [*top, "", "", ""][:3]
        out.append([*row, repr(round(estimate, 6)), *cells])
    with path.open("w", newline="") as handle:
        csv.writer(handle, lineterminator="\n").writerows(out)


#: Separates a waiting job's reason from its predicted duration in the live queue.
EXPLAIN_SEPARATOR = " | predicted "


def with_explanation(reason: str, policy: Any, job_id: str) -> str:
    """``reason`` plus the job's predicted duration and top 3 contributions when the policy
    orders by ``primo`` (``shapeshift queue --explain`` shows the part after the separator)."""
    estimator = policy_estimator(policy)
    found = estimator.explanation(job_id) if estimator is not None else None
    if found is None:
        return reason
    estimate, top = found
    return f"{reason}{EXPLAIN_SEPARATOR}{estimate / 3600:.2g} h: {', '.join(top)}"
