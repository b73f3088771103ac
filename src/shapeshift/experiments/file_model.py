"""The experiment file's shape, as pydantic models: which keys exist, their types and
simple bounds. Anything that needs more than the key itself (does the trace exist, does
the policy take this parameter, does a sweep axis apply) is checked in
``schema_checks``; ``schema`` puts the two together."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, ValidationError, field_validator, model_validator

from shapeshift.engine.overheads import NAMED_PENALTIES

Loc = tuple[str | int, ...]


class SchemaError(Exception):
    """A problem at key path ``loc``; the loader adds the file and the line."""

    def __init__(self, loc: Loc, message: str):
        super().__init__(message)
        self.loc = loc
        self.message = message


class Strict(BaseModel):
    # Non-finite numbers are refused everywhere: a NaN round or an infinite delay would
    # run to a result that means nothing.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class PolicyItem(Strict):
    policy: str
    name: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)


class ClusterItem(Strict):
    spec: str
    name: str | None = None


class OverheadsItem(Strict):
    launch_delay: float = Field(0.0, ge=0)
    restore_penalty: float | str = 30.0

    @field_validator("restore_penalty")
    @classmethod
    def _penalty(cls, value: float | str) -> float | str:
        if isinstance(value, str) and value not in NAMED_PENALTIES:
            raise ValueError(f"restore_penalty must be seconds or one of {', '.join(sorted(NAMED_PENALTIES))}")
        if isinstance(value, float) and value < 0:
            raise ValueError("restore_penalty must be >= 0")
        return value


class WindowItem(Strict):
    start: int = Field(..., ge=0)
    end: int = Field(..., gt=0)

    @model_validator(mode="after")
    def _ordered(self) -> WindowItem:
        if self.end <= self.start:
            raise ValueError("window end must be greater than start")
        return self


class ThroughputItem(Strict):
    kind: str = "trace"
    path: str | None = None


class EnergyItem(Strict):
    mode: str = "ces"
    params: dict[str, Any] = Field(default_factory=dict)
    baseline: bool = True


class ExperimentFile(Strict):
    name: str | None = None
    description: str = ""
    workloads: list[dict[str, Any]] = Field(..., min_length=1)
    clusters: list[ClusterItem] = Field(..., min_length=1)
    policies: list[PolicyItem] = Field(..., min_length=1)
    seeds: list[NonNegativeInt] = Field(default_factory=lambda: [0], min_length=1)
    round: float | None = Field(None, gt=0)
    overheads: OverheadsItem = Field(default_factory=OverheadsItem)
    window: WindowItem | None = None
    throughput: ThroughputItem = Field(default_factory=ThroughputItem)
    energy: EnergyItem | None = None
    sweep: dict[str, list[Any]] = Field(default_factory=dict)

    @field_validator("energy", mode="before")
    @classmethod
    def _energy_shorthand(cls, value: Any) -> Any:
        if value == "none":
            return None
        return {"mode": value} if isinstance(value, str) else value

    @field_validator("throughput", mode="before")
    @classmethod
    def _throughput_shorthand(cls, value: Any) -> Any:
        return {"kind": value} if isinstance(value, str) else value

    @field_validator("clusters", mode="before")
    @classmethod
    def _cluster_shorthand(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [{"spec": str(v)} if isinstance(v, str | int) else v for v in value]
        return value

    @field_validator("policies", mode="before")
    @classmethod
    def _policy_shorthand(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [{"policy": v} if isinstance(v, str) else v for v in value]
        return value

def dotted(loc: Loc) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def pydantic_problem(exc: ValidationError, prefix: Loc = ()) -> SchemaError:
    err = exc.errors()[0]
    loc = prefix + tuple(err["loc"])
    if err["type"] == "extra_forbidden":
        parent = loc[:-1]
        return SchemaError(loc, f"unknown key {loc[-1]!r}" + (f" in {dotted(parent)}" if parent else ""))
    if err["type"] == "missing":
        return SchemaError(loc, "required key is missing")
    return SchemaError(loc, err["msg"].removeprefix("Value error, "))


