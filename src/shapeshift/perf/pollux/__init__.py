"""Pollux/AdaptDL goodput: measured profiles, the fitted throughput model, statistical
efficiency and the simulation ground truth built from them (Qiao et al., "Pollux:
Co-adaptive Cluster Scheduling for Goodput-Optimized Deep Learning", OSDI 2021)."""
