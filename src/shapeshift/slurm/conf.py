"""``slurm.conf`` (and ``gres.conf``): the nodes, partitions and scheduling parameters a
replay of Slurm needs.

Read as ``slurmctld`` reads them (``src/common/read_config.c``; the ``slurm.conf`` and
``gres.conf`` man pages): ``Key=Value`` pairs, keys case-insensitive, ``#`` comments,
``\\`` continuations; a ``NodeName``/``PartitionName`` line is one record, and
``NodeName=DEFAULT``/``PartitionName=DEFAULT`` set defaults for the records after it.
Defaults are Slurm's own (cited beside each). Keys we do not model are kept, sorted, in
``SlurmConf.ignored`` so a user sees what was left out; a wrong value is one
``InputError`` with the file, line and key.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shapeshift.errors import InputError
from shapeshift.slurm.conf_lines import Reader, logical_lines
from shapeshift.slurm.gres import apply_gres
from shapeshift.slurm.values import billing_weight, count, expand_hostlist, time_seconds, uint16_value, yes_no

#: The ``SchedulerParameters`` options the replay models, with Slurm's defaults
#: (``src/plugins/sched/backfill/backfill.c``: ``BACKFILL_WINDOW``, ``BACKFILL_RESOLUTION``,
#: ``DEF_BF_MAX_JOB_TEST``, ``BACKFILL_INTERVAL``; ``src/slurmctld/job_scheduler.c``:
#: ``def_job_limit``; ``controller.c``: ``sched_interval``). Windows in seconds.
SCHED_DEFAULTS: dict[str, int] = {
    "bf_window": 1440 * 60,
    "bf_resolution": 60,
    "bf_max_job_test": 500,
    "bf_interval": 30,
    "default_queue_depth": 100,
    "sched_interval": 60,
    "batch_sched_delay": 3,
}
_PREEMPT_MODES = {"off", "cancel", "requeue", "suspend", "gang", "within", "priority"}


@dataclass(frozen=True)
class SlurmNode:
    name: str
    cpus: int
    mem_mib: int
    gpus: int
    gpu_type: str = ""
    weight: int = 1
    #: Every GPU type ``Gres=`` names (``gpu_type`` is the first: one type per node is
    #: modelled, and the others are listed as ignored).
    gres_types: tuple[str, ...] = ()


@dataclass(frozen=True)
class SlurmPartition:
    name: str
    nodes: tuple[str, ...]
    default: bool = False
    priority_tier: int = 1
    priority_job_factor: int = 1
    preempt_mode: str = ""  # "" = the cluster's PreemptMode
    max_time: int | None = None  # seconds; None = UNLIMITED
    default_time: int | None = None
    billing: tuple[tuple[str, float], ...] = ()  # TRESBillingWeights, e.g. (("cpu", 1.0), ("gres/gpu", 4.0))
    up: bool = True


@dataclass(frozen=True)
class PriorityConf:
    """``PriorityType`` and the multifactor parameters (slurm.conf man page; defaults from
    ``src/common/read_config.c``: weights 0, half-life and max age 7 days, calc period 5 min,
    Fair Tree on unless ``PriorityFlags=NO_FAIR_TREE``)."""

    multifactor: bool = False
    weight_age: int = 0
    weight_fairshare: int = 0
    weight_jobsize: int = 0
    weight_partition: int = 0
    weight_qos: int = 0
    weight_assoc: int = 0
    decay_half_life: int = 7 * 86400
    max_age: int = 7 * 86400
    favor_small: bool = False
    calc_period: int = 300
    fair_tree: bool = True
    flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class SchedulerConf:
    backfill: bool = True  # SchedulerType=sched/backfill is Slurm's default
    params: dict[str, int] = field(default_factory=lambda: dict(SCHED_DEFAULTS))
    bf_continue: bool = False


@dataclass(frozen=True)
class SlurmConf:
    path: str
    nodes: tuple[SlurmNode, ...]
    partitions: tuple[SlurmPartition, ...]
    priority: PriorityConf = PriorityConf()
    scheduler: SchedulerConf = SchedulerConf()
    preempt_type: str = "none"  # none | partition_prio | qos
    preempt_mode: str = "off"
    #: ``PreemptMode`` flags beside the mode (``gang``, ``within``, ``priority``).
    preempt_flags: tuple[str, ...] = ()
    #: ``PreemptExemptTime`` in seconds (``None``: unset; -1 reads as unset, as Slurm does).
    preempt_exempt_time: int | None = None
    #: ``PreemptParameters=youngest_first`` (or ``SchedulerParameters=preempt_youngest_first``).
    preempt_youngest_first: bool = False
    #: ``AuthInfo=cred_expire`` (seconds, default 120): a requeued job may begin that long
    #: plus one second after its requeue (``job_mgr.c``).
    cred_expire: int = 120
    #: ``KillWait`` and ``MessageTimeout`` (seconds; defaults 30 and 10,
    #: ``DEFAULT_KILL_WAIT``/``DEFAULT_MSG_TIMEOUT``): a preemptor whose preemption began
    #: less than their sum ago preempts no more jobs (``node_scheduler.c``, ``select_nodes``).
    kill_wait: int = 30
    msg_timeout: int = 10
    ignored: tuple[str, ...] = ()

    def partition(self, name: str) -> SlurmPartition | None:
        return next((p for p in self.partitions if p.name == name), None)

    def ignored_note(self) -> str | None:
        """One line listing the keys read but not modelled (``None`` when there are none),
        so a user sees what the replay left out of their configuration."""
        if not self.ignored:
            return None
        return f"{Path(self.path).name}: keys not modelled (ignored): {', '.join(self.ignored)}"


def looks_like_slurm_conf(path: str | Path) -> bool:
    """Whether a file is a ``slurm.conf``: a line starting ``NodeName=`` or ``PartitionName=``."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            for _, line in zip(range(2000), handle, strict=False):
                if re.match(r"^\s*(NodeName|PartitionName|SlurmctldHost|ClusterName)\s*=", line, re.IGNORECASE):
                    return True
    except OSError:
        return False
    return False


def read_slurm_conf(path: str | Path, gres_conf: str | Path | None = None) -> SlurmConf:
    """Read a ``slurm.conf`` (and optionally a ``gres.conf``; a ``gres.conf`` beside the
    ``slurm.conf`` is read too)."""
    path = Path(path)
    reader = Reader(path)
    nodes: dict[str, SlurmNode] = {}
    node_defaults: dict[str, str] = {}
    part_rows: list[tuple[int, dict[str, str]]] = []
    part_defaults: dict[str, str] = {}
    glob: dict[str, tuple[int, str]] = {}
    for number, body in logical_lines(path):
        reader.line = number
        pairs = reader.pairs(number, body)
        head, head_value = pairs[0]
        if head == "nodename":
            values = dict(pairs[1:])
            if head_value.upper() == "DEFAULT":
                node_defaults.update(values)
                continue
            merged = {**node_defaults, **values}
            for name in reader.value("NodeName", head_value, expand_hostlist):
                nodes[name] = _node(reader, name, merged)
        elif head == "partitionname":
            values = dict(pairs[1:])
            if head_value.upper() == "DEFAULT":
                part_defaults.update(values)
                continue
            part_rows.append((number, {"partitionname": head_value, **part_defaults, **values}))
        elif head in {"nodeset", "downnodes", "frontendname", "switchname", "include"}:
            reader.ignore(head)
        else:
            for key, value in pairs:
                glob[key] = (number, value)
    if not nodes:
        raise InputError("no NodeName line: a slurm.conf needs at least one node", path=str(path))
    gres = Path(gres_conf) if gres_conf else path.with_name("gres.conf")
    if gres_conf or gres.exists():
        overrides = "config_overrides" in glob.get("slurmdparameters", (0, ""))[1].lower()
        nodes = apply_gres(gres, nodes, reader.ignored, overrides=overrides)
    partitions = tuple(_partition(reader, number, values, nodes) for number, values in part_rows)
    return _globals(reader, glob, tuple(nodes.values()), partitions)


def _node(reader: Reader, name: str, values: dict[str, str]) -> SlurmNode:
    cpus = values.get("cpus") or values.get("procs")
    if cpus:
        cpu_count = reader.value("CPUs", cpus, lambda t: count(t, minimum=1))
    else:
        cpu_count = 1
        for key in ("boards", "sockets", "corespersocket", "threadspercore"):
            if key in values:
                cpu_count *= reader.value(key, values[key], lambda t: count(t, minimum=1))
    mem = reader.value("RealMemory", values.get("realmemory", "1"), lambda t: count(t, minimum=1))
    gpus, types = reader.gres_gpus("Gres", values.get("gres", ""))
    if len(types) > 1:  # one GPU type per node is modelled: the first
        reader.ignore(*(f"NodeName.Gres:{t}" for t in types[1:]))
    weight = reader.value("Weight", values.get("weight", "1"), count)
    known = {"cpus", "procs", "boards", "sockets", "corespersocket", "threadspercore", "realmemory", "gres", "weight"}
    reader.ignore(*(f"NodeName.{k}" for k in values if k not in known))
    return SlurmNode(name, cpu_count, mem, gpus, types[0] if types else "", weight, types)


def _partition(reader: Reader, number: int, values: dict[str, str], nodes: dict[str, SlurmNode]) -> SlurmPartition:
    reader.line = number
    name = values["partitionname"]
    members_text = values.get("nodes", "")
    if members_text.upper() == "ALL":
        members = tuple(nodes)
    else:
        members = tuple(reader.value("Nodes", members_text, expand_hostlist)) if members_text else ()
        unknown = [m for m in members if m not in nodes]
        if unknown:
            raise InputError(
                f"partition {name} names node {unknown[0]} that no NodeName line defines",
                path=str(reader.path),
                line=number,
                field="Nodes",
            )
    mode = values.get("preemptmode", "").lower()
    if mode and not set(mode.split(",")) <= _PREEMPT_MODES:
        raise InputError(f"bad PreemptMode {mode!r}", path=str(reader.path), line=number, field="PreemptMode")
    billing = tuple(
        (k.strip().lower(), reader.value("TRESBillingWeights", v, lambda t, k=k: billing_weight(k.strip().lower(), t)))
        for k, _, v in (item.partition("=") for item in values.get("tresbillingweights", "").split(",") if item)
    )
    known = {"partitionname", "nodes", "default", "prioritytier", "priorityjobfactor", "priority", "preemptmode"}
    known |= {"maxtime", "defaulttime", "tresbillingweights", "state"}
    reader.ignore(*(f"PartitionName.{k}" for k in values if k not in known))
    legacy = values.get("priority")  # before Slurm 16.05 one Priority= set both
    return SlurmPartition(
        name=name,
        nodes=members,
        default=reader.value("Default", values.get("default", "NO"), yes_no),
        priority_tier=reader.value("PriorityTier", values.get("prioritytier", legacy or "1"), count),
        priority_job_factor=reader.value("PriorityJobFactor", values.get("priorityjobfactor", legacy or "1"), count),
        preempt_mode=mode.split(",")[0] if mode else "",
        max_time=reader.value("MaxTime", values.get("maxtime", "UNLIMITED"), time_seconds),
        default_time=reader.value("DefaultTime", values.get("defaulttime", "UNLIMITED"), time_seconds),
        billing=billing,
        up=values.get("state", "UP").upper() == "UP",
    )


def _globals(
    reader: Reader, glob: dict[str, tuple[int, str]], nodes: tuple[SlurmNode, ...], parts: tuple[SlurmPartition, ...]
) -> SlurmConf:
    def get(key: str, default: str, parse: Callable[[str], Any]) -> Any:
        number, text = glob.get(key, (0, default))
        reader.line = number or None  # type: ignore[assignment]
        return reader.value(key, text, parse)

    def plugin(key: str, default: str, allowed: set[str]) -> str:
        name = get(key, default, str).lower().rsplit("/", 1)[-1]
        if name not in allowed:
            reader.line = glob[key][0]
            raise InputError(
                f"unsupported {reader.name(key)} {glob[key][1]!r}; expected one of {', '.join(sorted(allowed))}",
                path=str(reader.path),
                line=glob[key][0],
                field=reader.name(key),
            )
        return name

    flags = tuple(f.strip().upper() for f in get("priorityflags", "", str).split(",") if f.strip())
    priority = PriorityConf(
        multifactor=plugin("prioritytype", "priority/basic", {"basic", "multifactor"}) == "multifactor",
        weight_age=get("priorityweightage", "0", count),
        weight_fairshare=get("priorityweightfairshare", "0", count),
        weight_jobsize=get("priorityweightjobsize", "0", count),
        weight_partition=get("priorityweightpartition", "0", count),
        weight_qos=get("priorityweightqos", "0", count),
        weight_assoc=get("priorityweightassoc", "0", count),
        decay_half_life=get("prioritydecayhalflife", "7-0", lambda t: time_seconds(t) or 0),
        max_age=get("prioritymaxage", "7-0", lambda t: time_seconds(t) or 0),
        favor_small=get("priorityfavorsmall", "NO", yes_no),
        calc_period=get("prioritycalcperiod", "5", lambda t: time_seconds(t) or 300),
        fair_tree="NO_FAIR_TREE" not in flags,
        flags=flags,
    )
    params = dict(SCHED_DEFAULTS)
    bf_continue = False
    number, text = glob.get("schedulerparameters", (0, ""))
    reader.line = number
    for item in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = item.partition("=")
        key = key.strip().lower()
        if key == "bf_continue":
            bf_continue = True
        elif key in params and sep:
            scale = 60 if key == "bf_window" else 1
            params[key] = reader.value(f"SchedulerParameters.{key}", value, count) * scale
        else:
            reader.ignore(f"SchedulerParameters.{key}")
    scheduler = SchedulerConf(
        backfill=plugin("schedulertype", "sched/backfill", {"backfill", "builtin"}) == "backfill",
        params=params,
        bf_continue=bf_continue,
    )
    preempt_mode = get("preemptmode", "OFF", str).lower()
    mode_line = glob.get("preemptmode", (None, ""))[0]
    if not set(preempt_mode.split(",")) <= _PREEMPT_MODES:
        raise InputError(
            f"bad PreemptMode {preempt_mode!r}", path=str(reader.path), line=mode_line, field="PreemptMode"
        )
    modes = preempt_mode.split(",")
    if modes == ["suspend"]:  # read_config.c: slurmctld refuses to start
        raise InputError(
            "PreemptMode=SUSPEND requires GANG too (PreemptMode=SUSPEND,GANG), as slurmctld says",
            path=str(reader.path),
            line=mode_line,
            field="PreemptMode",
        )
    exempt_text = get("preemptexempttime", "-1", str).strip()
    exempt = None if exempt_text in ("-1", "") else get("preemptexempttime", "-1", lambda t: time_seconds(t) or 0)
    preempt_params = {p.strip().lower() for p in get("preemptparameters", "", str).split(",")}
    auth = dict(item.strip().lower().partition("=")[::2] for item in get("authinfo", "", str).split(",") if "=" in item)
    cred_expire = reader.value("AuthInfo.cred_expire", auth["cred_expire"], count) if "cred_expire" in auth else 120
    if cred_expire < 5:  # slurm_cred.c: an invalid value falls back to the default
        cred_expire = 120

    def uint16(key: str, name: str, default: str) -> int:
        number, text = glob.get(key, (0, default))
        reader.line = number
        return reader.value(name, text, uint16_value)

    kill_wait = uint16("killwait", "KillWait", "30")
    msg_timeout = uint16("messagetimeout", "MessageTimeout", "10")
    modelled = {"prioritytype", "priorityflags", "schedulertype", "schedulerparameters", "preempttype", "preemptmode"}
    modelled |= {"preemptexempttime", "preemptparameters", "killwait", "messagetimeout"}
    modelled |= {k for k in glob if k.startswith("priorityweight") and k != "priorityweighttres"}
    modelled |= {"prioritydecayhalflife", "prioritymaxage", "priorityfavorsmall", "prioritycalcperiod"}
    reader.ignore(*(k for k in glob if k not in modelled))
    return SlurmConf(
        path=str(reader.path),
        nodes=nodes,
        partitions=parts,
        priority=priority,
        scheduler=scheduler,
        preempt_type=plugin("preempttype", "preempt/none", {"none", "partition_prio", "qos"}),
        preempt_mode=modes[0],
        preempt_flags=tuple(modes[1:]),
        preempt_exempt_time=exempt,
        preempt_youngest_first="youngest_first" in preempt_params
        or "preempt_youngest_first" in {k for k in text.lower().split(",")},
        cred_expire=cred_expire,
        kill_wait=kill_wait,
        msg_timeout=msg_timeout,
        ignored=tuple(sorted(reader.ignored)),
    )
