"""The built-in demo run: 300 Poisson jobs (12/hour, Philly-like sizes) on 4 nodes x 8 GPUs.

Kept apart from the rest of ``shapeshift.runs`` so the command line can name the defaults
in its help without importing the simulator.
"""

DEMO_JOBS = 300
DEMO_CLUSTER = "4x8"
