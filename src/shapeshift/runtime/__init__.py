"""The live runtime: a controller that drives the scheduling engine on wall-clock time,
persistent state, an HTTP API and worker backends (local processes, Ray)."""
