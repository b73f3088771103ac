"""GPU-sharing placement on Alibaba's openb trace: Fragmentation Gradient Descent and its baselines.

Self-contained: the openb reader (``openb``), the fractional node/GPU state (``state``), the
typical-pod set and fragmentation measure (``frag``), the placement scorers (``placement``),
the paper's fill experiment (``fill``), its curve/report output (``report``) and the driver
of the authors' own simulator for peer runs (``reference``). The
reference for every rule is the authors' simulator, hkust-adsl/kubernetes-scheduler-simulator
at commit 8f3d6417353c5083c6d56617f255fadd8dc306bc (Apache-2.0); each module cites the file
it follows. Weng et al., "Beware of Fragmentation", USENIX ATC'23, is the paper.
"""

from __future__ import annotations

#: The reference simulator's commit that every citation in this package points at.
REFERENCE_COMMIT = "8f3d6417353c5083c6d56617f255fadd8dc306bc"
