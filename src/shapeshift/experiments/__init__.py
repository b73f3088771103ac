"""Declarative experiments: a YAML file names workloads, clusters, policies, seeds and
sweep axes; the runner executes their cross product in parallel, caches every finished
run by a content hash of its inputs, and gathers one tidy results table that the report
turns into figures."""
