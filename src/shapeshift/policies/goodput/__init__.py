"""Elastic policies that size every job by its modelled speed-up on more GPUs.

:mod:`.optimus` registers ``optimus`` (Peng et al., EuroSys 2018: greedy marginal gain in
remaining time), :mod:`.pollux` ``pollux`` (Qiao et al., OSDI 2021: goodput, GPU counts
and batch sizes together) and :mod:`.sia` ``sia`` (Jayaram Subramanya et al., SOSP 2023:
heterogeneity-aware goodput, one integer program per round, on the plan-aware knowledge).
:mod:`.common` places the GPU counts Pollux and Sia choose.
"""
