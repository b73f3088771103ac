"""Kubernetes batch queueing as its users configure it: Kueue and KAI-Scheduler.

Readers of the projects' own YAML objects (``kueue_config``, ``kai_config``) and their
admission and fair-share rules as pure decision functions (``kueue_rules``,
``kai_rules``), free of the simulation engine so each rule can be checked against the
projects' documented examples on its own.
"""
