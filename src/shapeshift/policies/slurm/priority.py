"""Slurm's multifactor job priority, factor by factor.

Source: ``src/plugins/priority/multifactor/priority_multifactor.c`` (Slurm ``master``
after 25.05, commit 284c3b95), ``set_priority_factors`` and ``_get_priority_internal``;
docs https://slurm.schedmd.com/priority_multifactor.html. Each factor is in [0, 1]:

* age: ``min(1, (now - eligible) / PriorityMaxAge)``, whole seconds;
* fair share: the user association's factor (``fairshare.FairShare``);
* job size (without ``SMALL_RELATIVE_TO_TIME``): favouring large jobs,
  ``(min_nodes / nodes + cpus / cluster_cpus) / 2``; with ``PriorityFavorSmall=YES``,
  ``((nodes - min_nodes) / nodes + (cluster_cpus - cpus) / cluster_cpus) / 2``;
* partition: ``PriorityJobFactor / max PriorityJobFactor`` over partitions;
* QOS: the QOS priority over the largest QOS priority.

Priority = ``sum(weight * factor) - nice``, truncated to an integer, at least 1 (0 means
held). With ``PriorityType=priority/basic`` jobs keep their submission order (Slurm
gives each new job a priority one below the previous one).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from shapeshift.errors import InputError
from shapeshift.slurm.conf import PriorityConf
from shapeshift.slurm.qos import Qos


@dataclass(frozen=True, slots=True)
class JobFacts:
    """What the priority of a pending job depends on."""

    eligible: float
    cpus: float
    min_nodes: int
    assoc: str
    part_factor: float  # the partition's normalised PriorityJobFactor
    qos_factor: float  # the QOS's normalised priority
    nice: int = 0


@dataclass(frozen=True, slots=True)
class Factors:
    age: float
    fairshare: float
    jobsize: float
    partition: float
    qos: float


class Multifactor:
    def __init__(self, conf: PriorityConf, cluster_cpus: float, node_count: int):
        self.conf = conf
        self.cluster_cpus = cluster_cpus
        self.node_count = node_count

    def factors(self, job: JobFacts, now: float, fairshare: float) -> Factors:
        conf = self.conf
        age = 0.0
        if conf.weight_age:
            diff = max(0, int(now) - int(job.eligible))
            age = 1.0 if conf.max_age <= 0 or diff >= conf.max_age else diff / conf.max_age
        size = 0.0
        if conf.weight_jobsize and self.node_count and self.cluster_cpus:
            nodes, cpus, total = self.node_count, max(job.cpus, 1.0), self.cluster_cpus
            if conf.favor_small:
                size = (nodes - job.min_nodes) / nodes if nodes > job.min_nodes else 0.0
                size = (size + (total - cpus) / total) / 2
            else:
                size = (job.min_nodes / nodes + cpus / total) / 2
            size = min(max(size, 0.0), 1.0)
        return Factors(
            age=age,
            fairshare=fairshare if conf.weight_fairshare else 0.0,
            jobsize=size,
            partition=job.part_factor if conf.weight_partition else 0.0,
            qos=job.qos_factor if conf.weight_qos else 0.0,
        )

    def priority(self, job: JobFacts, now: float, fairshare: float) -> int:
        f = self.factors(job, now, fairshare)
        c = self.conf
        total = (
            f.age * c.weight_age
            + f.fairshare * c.weight_fairshare
            + f.jobsize * c.weight_jobsize
            + f.partition * c.weight_partition
            + f.qos * c.weight_qos
            - job.nice
        )
        return max(1, min(int(total), 0xFFFFFFFF))

    def static(self, job: JobFacts) -> tuple[float, float, float, float, float]:
        """What of ``job``'s priority does not change while it waits, as ``priorities``
        reads it: its eligible time in whole seconds, job-size, partition and QOS
        factors, and nice."""
        f = self.factors(job, job.eligible, 0.0)
        return (float(int(job.eligible)), f.jobsize, f.partition, f.qos, float(job.nice))

    def priorities(self, rows: np.ndarray, now: float, fairshare: np.ndarray) -> np.ndarray:
        """``priority`` of many jobs at once: ``rows`` holds their ``static`` tuples,
        ``fairshare`` their associations' factors. The same factors, products and sums
        in the same order as ``priority``, so each job gets the same integer."""
        c = self.conf
        eligible, size, part, qos, nice = rows.T
        age = np.zeros(len(rows))
        if c.weight_age:
            diff = np.maximum(0, int(now) - eligible.astype(np.int64))
            age = np.ones(len(rows)) if c.max_age <= 0 else np.where(diff >= c.max_age, 1.0, diff / c.max_age)
        fs = fairshare if c.weight_fairshare else np.zeros(len(rows))
        total = age * c.weight_age + fs * c.weight_fairshare + size * c.weight_jobsize
        total = total + part * c.weight_partition + qos * c.weight_qos - nice
        return np.clip(np.trunc(total), 1, 0xFFFFFFFF).astype(np.int64)


def qos_table(text: str, dump: tuple[Qos, ...] = ()) -> dict[str, float]:
    """Each QOS's normalised priority (its priority over the largest)."""
    table: dict[str, float] = {q.name: float(q.priority) for q in dump}
    for item in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = item.partition("=")
        if not sep or not value.strip().isdigit():
            raise InputError(f"qos_priority item {item!r} must be NAME=WHOLE_NUMBER", field="qos_priority")
        table[name.strip()] = float(value)
    top = max(table.values(), default=0.0)
    return {k: (v / top if top else 0.0) for k, v in table.items()}
