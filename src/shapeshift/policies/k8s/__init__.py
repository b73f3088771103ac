"""Kubernetes batch queueing as its users configure it: Kueue and KAI-Scheduler, read from
their own YAML (``shapeshift.k8s``) and run as Shapeshift policies."""
