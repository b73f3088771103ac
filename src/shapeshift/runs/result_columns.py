"""Column sets of the files a run writes, importable without the simulator."""

#: The summary fields a comparison shows per policy (seconds unless named).
COMPARE_KEYS = (
    "jobs_completed",
    "jobs_total",
    "avg_jct",
    "p50_jct",
    "p99_jct",
    "avg_queue",
    "p99_queue",
    "avg_responsiveness",
    "makespan",
    "gpu_utilization",
    "preemptions",
    "reconfigurations",
    "jobs_unfinished",
)
