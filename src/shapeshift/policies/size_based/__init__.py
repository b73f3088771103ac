"""Size-based scheduling: jobs ranked by how much work they need or have had.

:mod:`.sjf` registers ``sjf`` and ``srtf`` (shortest job / remaining time first, with a
pluggable duration estimate), :mod:`.las` ``las`` (least attained service) and :mod:`.qssf`
Helios's ``qssf`` (quasi-shortest service first on predicted GPU time). :mod:`.srtf_table`
and :mod:`.srtf_rank` keep the running jobs as arrays so ranking them costs array
operations; Themis reuses both.
"""
