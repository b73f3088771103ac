"""``run(spec)``: the one place where a simulation is assembled.

Assembly order, each step a composable wrapper or component of the run:

1. the policy, built by name from the registry (parameters validated there);
2. energy management (CES), a wrapper that hides powered-down nodes from the policy;
3. the interval recorder, outermost, so it sees the schedule the engine applies;
4. the executor's throughput model, by name (recorded durations or measured speeds);
5. the event loop (``shapeshift.sim.simulator.simulate``);
6. the summary, with the window, energy and policy-specific fields added.

With energy management the same spec is run again without it (``EnergySpec.baseline``)
to report the JCT cost of powering nodes down.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from shapeshift.analysis.metrics import summarize
from shapeshift.engine.contract import AdaptsInterference, Policy, ReportsSummary
from shapeshift.errors import InputError
from shapeshift.policies.framework.registry import make_policy, policy_info
from shapeshift.runs.backends import check_backend
from shapeshift.runs.models import build_interference, build_throughput
from shapeshift.runs.parallel import NotSplittable, serial_reason, simulate_partitions
from shapeshift.runs.recording import IntervalRecorder
from shapeshift.runs.result import RunResult
from shapeshift.runs.spec import RunSpec
from shapeshift.runs.window import windowed_summary
from shapeshift.sim.simulator import hand_replay, simulate

ProgressCallback = Callable[[int, int], None]


def policy_params(spec: RunSpec) -> dict[str, object]:
    """The policy's parameters, with the run's seed as its ``seed`` unless one is given: every
    random choice of a run follows the run's seed."""
    params = spec.policy_params
    info = policy_info(spec.policy)
    if "seed" in info.params.model_fields and "seed" not in params:
        params["seed"] = spec.seed
    return params


def run(
    spec: RunSpec,
    *,
    progress: ProgressCallback | None = None,
    workers: int = 1,
    on_serial: Callable[[str], None] | None = None,
    backend: str = "processes",
) -> RunResult:
    """Simulate ``spec`` to the end and return its summary, per-job rows and recordings.

    Bad inputs (an unknown policy or parameter, a round-based policy without a round, a
    job the speed model cannot run) raise ``InputError``; the same spec always gives the
    same result. ``workers`` above 1 simulates the partitions (virtual clusters) in that
    many processes when the run allows it (``shapeshift.runs.parallel.serial_reason``),
    with the same result as one process; otherwise ``on_serial(reason)`` is told why not.
    ``backend="ray"`` runs those partitions as Ray tasks instead (``runs.backends``).
    """
    check_backend(backend)
    args = policy_params(spec)
    inner = make_policy(spec.policy, args)
    hand_replay(inner)  # before any wrapper hides that it plans by simulating
    reason = serial_reason(spec, inner) if workers > 1 else ""
    if reason and on_serial is not None:
        on_serial(reason)
    if workers > 1 and not reason:
        try:
            simulation = simulate_partitions(spec, args, workers, progress, backend)
        except ValueError as exc:
            raise InputError(str(exc)) from None
        except NotSplittable as exc:
            if on_serial is not None:
                on_serial(f"{exc}; simulated again in one process")
        else:
            summary = summarize(simulation, _policy_extra(spec, inner))
            throughput = build_throughput(spec.throughput.kind, spec.throughput.path, spec.cluster)
            return RunResult(spec=spec, summary=summary, simulation=simulation, policy=inner, throughput=throughput)
    policy: Policy = inner
    ces = None
    if spec.energy is not None:
        from shapeshift.energy.sim_component import CESPolicy, ces_config

        ces = CESPolicy(inner, spec.cluster, ces_config(spec.energy.params))
        policy = ces
    recorder = IntervalRecorder(policy) if spec.records_intervals else None
    if recorder is not None:
        policy = recorder
    throughput = build_throughput(spec.throughput.kind, spec.throughput.path, spec.cluster)
    interference = build_interference(spec.interference, spec.seed)
    if isinstance(inner, AdaptsInterference):  # a policy that changes how sharing jobs run
        interference = inner.interference_model(interference)
    try:
        simulation = simulate(
            spec.workload.jobs(),
            spec.cluster,
            policy,
            workload_name=spec.workload.name,
            throughput=throughput,
            overheads=spec.overheads,
            round_seconds=spec.round_seconds,
            progress=progress,
            interference=interference,
        )
    except ValueError as exc:
        raise InputError(str(exc)) from None
    intervals = recorder.finish(simulation) if recorder is not None else None

    extra = _policy_extra(spec, inner)
    energy = None
    if ces is not None:
        from shapeshift.energy.sim_component import energy_extra

        baseline = None
        if spec.energy is not None and spec.energy.baseline:
            plain = dataclasses.replace(spec, energy=None, record=frozenset(), window=None)
            baseline = run(plain).simulation
        energy = energy_extra(simulation, baseline, ces)
        extra.update(energy)
    if spec.window is not None:
        assert intervals is not None
        start, end = spec.window
        tracked = spec.workload.frame["job_id"].iloc[start:end].tolist()
        summary = windowed_summary(simulation, tracked, spec.window, intervals, extra)
    else:
        summary = summarize(simulation, extra)
    return RunResult(
        spec=spec,
        summary=summary,
        simulation=simulation,
        intervals=tuple(intervals) if intervals is not None else None,
        energy=energy,
        policy=inner,
        throughput=throughput,
    )


def _policy_extra(spec: RunSpec, policy: Policy) -> dict[str, Any]:
    """The summary fields a run adds: its seed and the policy's own figures."""
    extra: dict[str, Any] = {"seed": spec.seed}
    if spec.setting:
        from shapeshift.runs.setting import setting_summary

        extra["setting"] = setting_summary(spec.setting)
    if isinstance(policy, ReportsSummary):
        extra.update(policy.summary_fields())
    return extra
