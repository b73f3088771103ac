"""Plan-aware policies: Rubick and its variants, and the baselines AntMan and Synergy.

Shared machinery: :mod:`.knowledge` (what a policy knows about job performance: a model
fitted on a 7-row profiling sample per model, refit online from observed throughput,
cached best plans and sensitivity curves) and :mod:`.core` (the scheduling skeleton of
Rubick's Algorithm 1: minRes for guaranteed jobs, slope-ordered visiting, shrinking, plan
choice and host-memory allocation). One module per policy registers it. Sia, which plans
on this knowledge too, lives with the goodput policies (``shapeshift.policies.goodput``).
"""
