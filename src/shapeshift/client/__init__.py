"""Client library for training scripts run by the Shapeshift controller.

``Lease`` tells a script when to stop (preemption or reconfiguration) without a round trip
per step; ``report`` sends progress and measured iteration times back, which the controller
shows in ``shapeshift queue`` and plan-aware policies use to refit their performance model.
Only the standard library is used, so any script can import it cheaply.
"""

from shapeshift.client.lease import PREEMPTED_EXIT, Lease, WorkerEnv
from shapeshift.client.report import flush, report

__all__ = ["PREEMPTED_EXIT", "Lease", "WorkerEnv", "flush", "report"]
