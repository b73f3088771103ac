"""``pollux``'s parameters (:mod:`.pollux`): each description names the artifact rule it
follows, or says "ours"."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from shapeshift.policies.framework.registry import PolicyParams


class PolluxParams(PolicyParams):
    """See :mod:`.pollux`; every default is the artifacts' but ``genetic_warm=job`` (the
    artifact's pairing by position is a bug)."""

    profiles: str | None = None
    round: float = Field(60.0, gt=0)
    p: float = Field(-1.0, le=1.0)
    restart_delay: float = Field(30.0, ge=0)
    restart_count: Literal["artifact", "moves"] = Field(
        "artifact",
        description="the restarts the restart factor counts. artifact: unaware, a move to other nodes of the "
        "same GPU type with the same GPUs per node is none (the Sia artifact's Job.reallocate compares that "
        "tuple); otherwise every move is one (the Pollux artifact's Job.reallocate); moves (ours): every move "
        "is one, unaware too",
    )
    explore: bool = True
    max_replicas: int = Field(64, ge=1)
    unaware: bool = Field(
        False,
        description="the Sia paper's heterogeneity-unaware Pollux baseline as its artifact runs it: virtual "
        "nodes of the smallest node's GPU count, one model over all types' profiles, a mixed-type "
        "allocation reduced to its majority type (sia-simulator/cluster_unaware.py)",
    )
    fixed_batch: Literal["tune", "keep"] = Field(
        "tune",
        description="unaware: tune: a job whose workload fixes its batch (NCF) has it tuned from its initial "
        "batch after every epoch, up to the fixed one, on at most the GPUs it asked for (the Sia artifact's "
        "cluster_unaware.py: batch tuning on for every job, NCF's largest batch 32,768, max_replicas 1); keep "
        "(ours): it runs at its own batch, as without unaware (the Pollux simulator fixes NCF's)",
    )
    unaware_cap: Literal["type", "cluster"] = Field(
        "type",
        description="unaware: type: a job gets at most the GPUs of the GPU type with fewest in the partition "
        "(the artifact's max_num_replicas, multi_simulator_unaware.py: 16 on its default cluster); cluster "
        "(ours): up to max_replicas over the whole partition",
    )
    unaware_profile: str = Field(
        "aws",
        description="unaware: the GPU type whose profile's per-GPU batch range (smallest and largest measured) "
        "the speedups assume, as the artifact's Job.get_speedup_fn reads applications['aws']; the untyped "
        "profile's range where the type has no profile or this is empty",
    )
    goodput_model: Literal["online", "offline"] = Field(
        "online",
        description="online: each job's own throughput model, fitted on the configurations it ran, linear "
        "speedup before its first (the artifact's Job.update_params); offline (ours): its application's "
        "model fitted on the whole placements.csv",
    )
    search: Literal["genetic", "exact"] = Field(
        "genetic",
        description="genetic: the source's NSGA-II search (Pollux §4.2 and both artifacts; population x "
        "generations, warm-started each round, seeded); exact (ours): the optimum of the same objective over "
        "packed placements by knapsack, about a tenth of the CPU",
    )
    repack: bool = Field(
        True,
        description="search=exact: a job keeping its GPU count on more nodes than packing needs moves to a "
        "placement on fewer when its goodput there times the restart factor beats its goodput where it is "
        "(the artifact's Problem._evaluate values each job on the nodes it gets and charges a move the "
        "restart factor); false (ours): it stays where it is",
    )
    genetic_value: Literal["placement", "packed"] = Field(
        "placement",
        description="search=genetic: placement: each state's jobs valued on the nodes and GPUs it gives "
        "them, restarted when their placement changes, the placement found kept (the artifact's "
        "Problem._evaluate); packed (ours): valued at their GPU count packed, restarted when the count "
        "changes, the counts placed as search=exact places them",
    )
    genetic_warm: Literal["job", "position"] = Field(
        "job",
        description="search=genetic: job: each job starts from its own rows of the previous round's result; "
        "position: the artifact's _adapt_prev_states, rows paired by position among the jobs of both rounds "
        "(previous order against this round's), so a job whose place in the attained-service order changed "
        "starts from another job's row",
    )
    population: int = Field(100, ge=2, description="search=genetic: states kept per generation")
    generations: int = Field(
        100, ge=1, description="search=genetic: generations per round, the first being the start (pymoo's n_gen)"
    )
    seed: int = Field(0, ge=0, description="search=genetic: seed of its random choices (the run's seed unless given)")
    batch_overshoot: bool = Field(
        True,
        description="true: a goodput search's candidate batch may pass the largest batch once each GPU's share "
        "is rounded up, and past it the GPUs' smallest per-GPU batches count (AdaptDL's "
        "GoodputFunction.optimize, in both artifacts' goodput.py; the job then runs the batch cut back to the "
        "largest); false (ours): candidates above the largest batch are dropped",
    )
    batch_cut: Literal["artifact", "regroup"] = Field(
        "artifact",
        description="how a batch past the largest runs: artifact: with the candidate's accumulation steps and "
        "each GPU's batch cut to int(largest / (GPUs x (steps + 1))) (both artifacts' Job.update_local_bsz; "
        "YOLOv3 on 3 GPUs: 22 micro-steps of 7, 462), its noise measured at that batch; regroup (ours): the "
        "cut-back batch re-split into fewer, fuller micro-steps (20 of 8, 480)",
    )
    batch_retune: Literal["epoch", "round"] = Field(
        "epoch",
        description="epoch: a job re-chooses its batch after every epoch it completes (the artifact's "
        "Job.step); round (ours): once per round",
    )
