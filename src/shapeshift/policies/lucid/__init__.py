"""Lucid (Hu et al., ASPLOS 2023): non-intrusive GPU sharing with interpretable models.

:mod:`.policy` registers ``lucid``; :mod:`.params` holds its parameters, :mod:`.profiler`
and :mod:`.scaling` the profiling partition, :mod:`.models` the duration and sharing
models, :mod:`.packing` and :mod:`.partners` the affine-pair binder, and :mod:`.tuner` the
system tuner, which replays history with the simulation it is handed.
"""
