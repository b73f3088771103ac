"""Slurm's own files: ``slurm.conf`` (+ ``gres.conf``) and ``sacctmgr`` association dumps.

The ``slurm`` policy (``shapeshift.policies.slurm``) and ``shapeshift whatif`` read them;
``--cluster`` accepts a ``slurm.conf`` as it accepts our cluster YAML. Histories
(``sacct``) are a trace format: ``shapeshift.workloads.readers.sacct``.
"""
