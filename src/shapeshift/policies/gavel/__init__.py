"""Gavel (Narayanan et al., OSDI 2020): heterogeneity-aware max-min fairness in rounds.

:mod:`.policy` registers ``gavel``; :mod:`.lp` solves the allocation over GPU types,
:mod:`.rounds` turns it into placements round by round as Gavel's simulator does, and
:mod:`.table` keeps a partition's jobs as rows of arrays so a round costs array operations.
"""
