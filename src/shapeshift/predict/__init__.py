"""Duration predictors for size-based scheduling (Helios, Hu et al., SC 2021).

A real scheduler never knows how long a job will run; Helios' QSSF policy predicts it
from jobs that already finished. Each module here is one ``DurationEstimator`` (see
``shapeshift.policies.framework.estimators``), registered there by name:

* ``noise`` (``noise.py``): the recorded duration times a seeded log-normal error, for
  traces with no user or job name to learn from (the Philly file);
* ``rolling`` (``rolling.py``): P_R, decayed means over the same user's similarly named
  jobs, then the user's jobs, then everyone's, at the same GPU demand;
* ``gbdt`` (``gbdt.py``): P_M, a LightGBM model on user, VC, name bucket, GPUs, CPUs and
  submit-time features, retrained periodically on finished jobs;
* ``helios`` (``blend.py``): lambda * P_R + (1 - lambda) * P_M, QSSF's predictor.

History-based predictors learn only in ``observe`` (finished jobs, in end-time order) and
fix a job's estimate the first time it is asked (at submission, as Helios assigns QSSF
priorities), so an estimate never depends on a job that finished after it was made.
"""
