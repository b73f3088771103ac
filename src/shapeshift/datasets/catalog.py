"""The reference data sets that ship inside Shapeshift, and the evaluation setting each
comes with.

Every entry is published data whose licence allows redistribution; each names its source,
licence and citation, and is exported with them (``shapeshift datasets export``). Data
whose terms forbid it (the Alibaba openb GPU-sharing trace: research use only) is not
here: the product reads its format from a path the user gives.

A data set may carry the *setting* its paper evaluated it in (the cluster, the speed
ground truth, the restart overheads), because a workload without them answers a
different question: Rubick's traces replayed with recorded durations and no restart pause
rank Sia ahead of Rubick, the paper's setting ranks it 2.6x behind. Run front doors
apply the setting where the user gave no value of their own (``shapeshift.runs.setting``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Literal

Kind = Literal["workload", "cluster", "throughput", "series", "table", "directory"]


@dataclass(frozen=True)
class Setting:
    """The evaluation setting a data set's paper used, as run options.

    ``cluster`` and ``throughput`` are what ``--cluster`` and ``--throughput`` accept
    (data set names included); ``launch_delay``/``restore_penalty``/``round_seconds``
    are seconds. ``policy_params`` go to every policy that declares the parameter (the
    plan-aware policies' ``traces``). ``tenants`` keeps the cluster's tenants; the
    Rubick study gives tenants only to its multi-tenant trace. ``share_limits``: jobs
    per GPU for the named policies (AntMan packs two). ``source`` says where it comes from.
    """

    source: str
    cluster: str | None = None
    throughput: str | None = None
    launch_delay: float | None = None
    restore_penalty: float | None = None
    round_seconds: float | None = None
    policy_params: tuple[tuple[str, str], ...] = ()
    tenants: bool = True
    share_limits: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class Source:
    """Who published a family of data sets, under which licence, and how to cite them."""

    where: str
    licence: str
    copyright: str
    citation: str


@dataclass(frozen=True)
class Dataset:
    """One bundled data set.

    ``main`` is the file inside it that its name stands for (``None``: the directory itself,
    e.g. a tree of speed tables); ``format`` the workload reader to use. The package holds
    it as ``bundled/<name>.tar.zst``.
    """

    name: str
    kind: Kind
    description: str
    main: str | None
    origin: Source
    format: str | None = None
    setting: Setting | None = None

    @property
    def archive(self) -> str:
        return f"{self.name}.tar.zst"

    @property
    def source(self) -> str:
        return self.origin.where

    @property
    def licence(self) -> str:
        return self.origin.licence

    @property
    def copyright(self) -> str:
        return self.origin.copyright

    @property
    def citation(self) -> str:
        return self.origin.citation


_PHILLY_CITATION = (
    "Myeongjae Jeon, Shivaram Venkataraman, Amar Phanishayee, Junjie Qian, Wencong Xiao, Fan Yang. "
    "Analysis of Large-Scale Multi-Tenant GPU Clusters for DNN Training Workloads. USENIX ATC 2019. "
    "Processed as in: Saurabh Agarwal, Amar Phanishayee, Shivaram Venkataraman. Blox: A Modular Toolkit "
    "for Deep Learning Schedulers. EuroSys 2024."
)
_HELIOS_CITATION = (
    "Qinghao Hu, Peng Sun, Shengen Yan, Yonggang Wen, Tianwei Zhang. Characterization and Prediction of "
    "Deep Learning Workloads in Large-Scale GPU Datacenters. SC 2021."
)
_POLLUX_CITATION = (
    "Aurick Qiao, Sang Keun Choe, Suhas Jayaram Subramanya, Willie Neiswanger, Qirong Ho, Hao Zhang, "
    "Gregory R. Ganger, Eric P. Xing. Pollux: Co-adaptive Cluster Scheduling for Goodput-Optimized Deep "
    "Learning. OSDI 2021."
)
_RUBICK_CITATION = (
    "Xinyi Zhang, Hanyu Zhao, Wencong Xiao, Xianyan Jia, Fei Xu, Yong Li, Wei Lin, Fangming Liu. Rubick: "
    "Exploiting Job Reconfigurability for Deep Learning Cluster Scheduling. MLSys 2025 (arXiv:2408.08586)."
)
#: Where each family comes from: GitHub ``owner/repository``, or the paper for Rubick's artifact.
PHILLY = Source(
    "msr-fiddle/philly-traces, processed by msr-fiddle/blox",
    "MIT",
    "Copyright (c) Microsoft Corporation",
    _PHILLY_CITATION,
)
HELIOS = Source("S-Lab-System-Group/HeliosArtifact", "MIT", "Copyright (c) 2021 S-Lab System Group", _HELIOS_CITATION)
HELIOS_DATA = Source("S-Lab-System-Group/HeliosData", "CC-BY-4.0", "S-Lab System Group", _HELIOS_CITATION)
POLLUX = Source("petuum/adaptdl (osdi21-artifact)", "Apache-2.0", "Copyright 2020 Petuum, Inc.", _POLLUX_CITATION)
RUBICK = Source("Rubick artifact (arXiv:2408.08586)", "Apache-2.0", "The Rubick authors", _RUBICK_CITATION)

#: Rubick §7.3 and the artifact's simulator: 8 x 8 A800, the measured tables as ground
#: truth, a 78 s checkpoint-restore pause per reconfiguration; the plan-aware policies
#: fit their performance model on the same tables.
RUBICK_SETTING = Setting(
    source="Rubick (MLSys 2025) §7.3 and its artifact's simulator",
    cluster="rubick-a800",
    throughput="ground-truth:rubick-a800-tables",
    launch_delay=0.0,
    restore_penalty=78.0,
    policy_params=(("traces", "rubick-a800-tables"),),
    tenants=False,
    share_limits=(("antman", 2),),
)
#: Pollux §5 and its simulator (simulator/simulator.py): 16 nodes x 4 GPUs, the measured
#: profiles with statistical efficiency, 30 s for every (re)allocation.
POLLUX_SETTING = Setting(
    source="Pollux (OSDI 2021) §5 and its artifact's simulator",
    cluster="16x4",
    throughput="pollux:pollux-profiles",
    launch_delay=30.0,
    restore_penalty=30.0,
)
#: The Helios simulations of Philly: the trace on its 11 virtual clusters.
#: Lucid's profiler as the Lucid artifact sets it for Philly (``utils.profiler_config``):
#: 2 nodes, T_prof 80 s, at most 2 x 2 = 4 GPUs.
PHILLY_SETTING = Setting(
    source="Helios artifact (philly_vc.csv): Philly's 11 virtual clusters; Lucid artifact's Philly profiler",
    cluster="philly-vcs",
    policy_params=(("profiler_nodes", "2"), ("profile_seconds", "80"), ("profiler_max_gpus", "4")),
)


def _rubick_workload(variant: str, description: str) -> Dataset:
    main = "naive.csv" if variant == "naive" else f"workload-{variant}.csv"
    setting = replace(RUBICK_SETTING, tenants=variant == "mt")
    return Dataset(f"rubick-{variant}", "workload", description, main, RUBICK, "rubick", setting)


_ENTRIES: tuple[Dataset, ...] = (
    Dataset(
        "philly",
        "workload",
        "Microsoft Philly GPU jobs of 2017 (82,247 jobs: submit, duration, GPUs, virtual cluster)",
        "philly_jobs.csv",
        PHILLY,
        "philly",
        PHILLY_SETTING,
    ),
    Dataset(
        "philly-vcs",
        "cluster",
        "Philly as simulated in the Helios study: 352 nodes x 8 P100 in 11 virtual clusters",
        "cluster-philly-vcs.yaml",
        HELIOS,
    ),
    Dataset(
        "philly-node-sequence",
        "series",
        "Minute series of active and total nodes in Philly (input of the CES energy study)",
        "philly_node_sequence.csv",
        HELIOS,
    ),
    Dataset(
        "helios-cluster-summary",
        "table",
        "Job counts, average run and queue times of the four Helios clusters",
        "helios_cluster_summary.csv",
        HELIOS_DATA,
    ),
    Dataset(
        "pollux-workload6",
        "workload",
        "Pollux's evaluation workload 6: 160 jobs of six applications on 16 x 4 GPUs",
        "workload-6.csv",
        POLLUX,
        "pollux",
        POLLUX_SETTING,
    ),
    Dataset(
        "pollux-profiles",
        "throughput",
        "Pollux's measured throughput and statistical-efficiency profiles of its six applications",
        None,
        POLLUX,
    ),
    _rubick_workload("base", "Rubick's 406-job evaluation trace (busiest 12 h of Philly, for 64 GPUs)"),
    _rubick_workload("bp", "Rubick's trace with each job's best plan for its requested GPUs"),
    _rubick_workload("mt", "Rubick's multi-tenant trace (is_sla marks the quota tenant's jobs)"),
    _rubick_workload("naive", "Ten Rubick jobs for smoke tests"),
    Dataset(
        "rubick-a800",
        "cluster",
        "The Rubick evaluation cluster: 8 servers x 8 A800-80GB, tenants A (64-GPU quota) and B",
        "cluster-a800-8x8.yaml",
        RUBICK,
    ),
    Dataset(
        "rubick-a800-tables",
        "throughput",
        "Measured iteration times of seven models' execution plans on A800 placements",
        None,
        RUBICK,
    ),
    Dataset(
        "rubick-fitting",
        "directory",
        "Rubick's small profiling runs per model and its fitted coefficients (history.csv)",
        None,
        RUBICK,
    ),
    Dataset(
        "rubick-models",
        "table",
        "The seven Rubick models: parameters, hidden size, layers, heads, sequence, batch",
        "models.csv",
        RUBICK,
    ),
)

#: Every bundled data set by name.
DATASETS: MappingProxyType[str, Dataset] = MappingProxyType({d.name: d for d in _ENTRIES})
