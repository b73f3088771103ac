"""Themis (Mahajan et al., NSDI 2020): finish-time fairness with one-round leases.

:mod:`.policy` registers ``themis``; :mod:`.table` keeps the waiting jobs' fairness facts
as arrays, and :mod:`.lease` chooses which jobs take the GPUs freed when leases end (with
the block walk of ``size_based.srtf_rank``).
"""
