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
class Dataset:
    """One bundled data set.

    ``archive`` is the package file holding it (``bundled/<archive>``, a zstd-compressed
    tar); ``main`` the file inside it that a name stands for (``None``: the directory
    itself, e.g. a tree of speed tables). ``format`` is the workload reader to use.
    """

    name: str
    kind: Kind
    description: str
    archive: str
    main: str | None
    source: str
    licence: str
    copyright: str
    citation: str
    format: str | None = None
    setting: Setting | None = None


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
#: Sources as GitHub ``owner/repository`` (and what inside it), or the paper for Rubick's artifact.
_PHILLY_SOURCE = "msr-fiddle/philly-traces, processed by msr-fiddle/blox"
_HELIOS_SOURCE = "S-Lab-System-Group/HeliosArtifact"
_POLLUX_SOURCE = "petuum/adaptdl (osdi21-artifact)"
_RUBICK_SOURCE = "Rubick artifact (arXiv:2408.08586)"

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
PHILLY_SETTING = Setting(source="Helios artifact (philly_vc.csv): Philly's 11 virtual clusters", cluster="philly-vcs")


def _rubick_workload(variant: str, description: str) -> Dataset:
    setting = replace(RUBICK_SETTING, tenants=variant == "mt")
    return Dataset(
        name=f"rubick-{variant}",
        kind="workload",
        description=description,
        archive=f"rubick-{variant}.tar.zst",
        main=f"{'naive' if variant == 'naive' else f'workload-{variant}'}.csv",
        source=_RUBICK_SOURCE,
        licence="Apache-2.0",
        copyright="The Rubick authors",
        citation=_RUBICK_CITATION,
        format="rubick",
        setting=setting,
    )


_ENTRIES: tuple[Dataset, ...] = (
    Dataset(
        name="philly",
        kind="workload",
        description="Microsoft Philly GPU jobs of 2017 (82,248 jobs: submit, duration, GPUs, virtual cluster)",
        archive="philly.tar.zst",
        main="philly_jobs.csv",
        source=_PHILLY_SOURCE,
        licence="MIT",
        copyright="Copyright (c) Microsoft Corporation",
        citation=_PHILLY_CITATION,
        format="philly",
        setting=PHILLY_SETTING,
    ),
    Dataset(
        name="philly-vcs",
        kind="cluster",
        description="Philly as simulated in the Helios study: 352 nodes x 8 P100 in 11 virtual clusters",
        archive="philly-vcs.tar.zst",
        main="cluster-philly-vcs.yaml",
        source=_HELIOS_SOURCE,
        licence="MIT",
        copyright="Copyright (c) 2021 S-Lab System Group",
        citation=_HELIOS_CITATION,
    ),
    Dataset(
        name="philly-node-sequence",
        kind="series",
        description="Minute series of active and total nodes in Philly (input of the CES energy study)",
        archive="philly-node-sequence.tar.zst",
        main="philly_node_sequence.csv",
        source=_HELIOS_SOURCE,
        licence="MIT",
        copyright="Copyright (c) 2021 S-Lab System Group",
        citation=_HELIOS_CITATION,
    ),
    Dataset(
        name="helios-cluster-summary",
        kind="table",
        description="Job counts, average run and queue times of the four Helios clusters",
        archive="helios-cluster-summary.tar.zst",
        main="helios_cluster_summary.csv",
        source="S-Lab-System-Group/HeliosData",
        licence="CC-BY-4.0",
        copyright="S-Lab System Group",
        citation=_HELIOS_CITATION,
    ),
    Dataset(
        name="pollux-workload6",
        kind="workload",
        description="Pollux's evaluation workload 6: 160 jobs of six applications on 16 x 4 GPUs",
        archive="pollux-workload6.tar.zst",
        main="workload-6.csv",
        source=_POLLUX_SOURCE,
        licence="Apache-2.0",
        copyright="Copyright 2020 Petuum, Inc.",
        citation=_POLLUX_CITATION,
        format="pollux",
        setting=POLLUX_SETTING,
    ),
    Dataset(
        name="pollux-profiles",
        kind="throughput",
        description="Pollux's measured throughput and statistical-efficiency profiles of its six applications",
        archive="pollux-profiles.tar.zst",
        main=None,
        source=_POLLUX_SOURCE,
        licence="Apache-2.0",
        copyright="Copyright 2020 Petuum, Inc.",
        citation=_POLLUX_CITATION,
    ),
    _rubick_workload("base", "Rubick's 406-job evaluation trace (busiest 12 h of Philly, for 64 GPUs)"),
    _rubick_workload("bp", "Rubick's trace with each job's best plan for its requested GPUs"),
    _rubick_workload("mt", "Rubick's multi-tenant trace (is_sla marks the quota tenant's jobs)"),
    _rubick_workload("naive", "Ten Rubick jobs for smoke tests"),
    Dataset(
        name="rubick-a800",
        kind="cluster",
        description="The Rubick evaluation cluster: 8 servers x 8 A800-80GB, tenants A (64-GPU quota) and B",
        archive="rubick-a800.tar.zst",
        main="cluster-a800-8x8.yaml",
        source=_RUBICK_SOURCE,
        licence="Apache-2.0",
        copyright="The Rubick authors",
        citation=_RUBICK_CITATION,
    ),
    Dataset(
        name="rubick-a800-tables",
        kind="throughput",
        description="Measured iteration times of seven models' execution plans on A800 placements",
        archive="rubick-a800-tables.tar.zst",
        main=None,
        source=_RUBICK_SOURCE,
        licence="Apache-2.0",
        copyright="The Rubick authors",
        citation=_RUBICK_CITATION,
    ),
    Dataset(
        name="rubick-fitting",
        kind="directory",
        description="Rubick's small profiling runs per model and its fitted coefficients (history.csv)",
        archive="rubick-fitting.tar.zst",
        main=None,
        source=_RUBICK_SOURCE,
        licence="Apache-2.0",
        copyright="The Rubick authors",
        citation=_RUBICK_CITATION,
    ),
    Dataset(
        name="rubick-models",
        kind="table",
        description="The seven Rubick models: parameters, hidden size, layers, heads, sequence, batch",
        archive="rubick-models.tar.zst",
        main="models.csv",
        source=_RUBICK_SOURCE,
        licence="Apache-2.0",
        copyright="The Rubick authors",
        citation=_RUBICK_CITATION,
    ),
)

#: Every bundled data set by name.
DATASETS: MappingProxyType[str, Dataset] = MappingProxyType({d.name: d for d in _ENTRIES})
