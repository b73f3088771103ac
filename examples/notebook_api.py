"""Shapeshift from Python, as in a notebook: one simulation, a comparison, the registry.

Run it with ``python examples/notebook_api.py``; the test suite executes it too
(``tests/test_run_api.py``). Every cell prints what a notebook would show.
"""

import pandas as pd

import shapeshift as ss

# %% A workload as a DataFrame (the generic format: job_id, submit_time, num_gpus,
# duration, plus optional columns). Three jobs on one node of 4 GPUs.
jobs = pd.DataFrame(
    {
        "job_id": ["a", "b", "c"],
        "submit_time": [0.0, 10.0, 20.0],
        "num_gpus": [4, 2, 2],
        "duration": [100.0, 50.0, 500.0],
    }
)

# %% One policy. FIFO: a holds all 4 GPUs until 100; b and c then start together.
fifo = ss.simulate(jobs, cluster="1x4", policy="fifo")
print(fifo.summary["avg_jct"], fifo.summary["makespan"])
print(fifo.jobs[["job_id", "first_start_time", "end_time", "jct"]])

# %% Several policies on the same inputs, one of them twice with other parameters.
table = ss.compare(
    {"fifo": "fifo", "las": "las", "tiresias-fast": ("tiresias", {"thresholds": [60, 600]})},
    workload=jobs,
    cluster="1x4",
    restore_penalty=0,
).table()
print(table[["avg_jct", "p99_jct", "preemptions"]])

# %% The built-in demo workload (300 seeded Poisson jobs on 4x8) under Tiresias, with a
# policy parameter given as a keyword argument.
demo = ss.simulate(policy="tiresias", starvation=2)
print(f"tiresias on the demo: {demo.summary['avg_jct'] / 3600:.2f} h average JCT")

# %% What is registered, with each policy's parameters.
for name, info in list(ss.policies().items())[:3]:
    print(name, [p[0] for p in info.parameters()])
