"""Surrogate-based hyper-parameter tuning (Hydro, OSDI'23; Hu's thesis, chapter 3).

``shrink`` (muP surrogates via torch.fx), ``mup`` (per-parameter learning rates),
``fusion``/``fuse_ops``/``fused_optim`` (F trials as one model), ``planner`` (how many
fit, which fuse, where), ``search`` (optuna plus eager transfer), ``space`` (the search
file), ``report`` (results table and plot), ``worker`` (the submitted job's process) and
``squeeze`` (tuning jobs in pipeline bubbles, simulation). Importing this package imports
nothing heavy: torch and optuna load with the modules that need them (the ``tune`` extra);
``squeeze`` needs neither. See docs/tune.md.
"""

#: Hydro's default width-scaling ratio S (``TuneConfig.scaling_num`` = 8 in the authors'
#: hydro/tune/tune_config.py and docs/api/TuneConfig.md; Hu's thesis, ch. 3). Kept here,
#: free of torch, so the CLI can show it without importing the shrinker.
DEFAULT_SCALE = 8
