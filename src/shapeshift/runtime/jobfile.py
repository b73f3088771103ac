"""Job files: what a user hands to ``shapeshift submit``.

A job file is validated completely before anything is stored, so a typo never leaves a
half-registered job behind: every problem becomes one ``InputError`` naming the field and
the reason. The command is a template (``{iterations}``, ``{job_id}``, ...) so the same
file can be relaunched with a new plan after a reconfiguration; unknown placeholders are
refused at submission, not at launch time hours later.
"""

from __future__ import annotations

import json
import string
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from shapeshift.errors import InputError
from shapeshift.model import ExecutionPlan, JobSpec, ModelError

#: Placeholders a command template may use; the backend fills them per launch.
TEMPLATE_FIELDS = (
    "job_id",
    "name",
    "iterations",
    "global_batch",
    "model",
    "plan",
    "checkpoint_dir",
    "world_size",
    "rank",
    "python",
)


class ResourceRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    gpus: int = Field(1, ge=0)
    cpus: float = Field(0.0, ge=0)
    mem_gb: float = Field(0.0, ge=0)


class JobFile(BaseModel):
    """A validated job file. ``resources`` or ``plan`` (or both, agreeing) set the GPU count."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(..., min_length=1, max_length=200)
    command: str = Field(..., min_length=1)
    resources: ResourceRequest | None = None
    model: str = ""
    global_batch: int | None = Field(None, ge=1)
    plan: str | None = None
    iterations: int | None = Field(None, ge=1)
    duration: float | None = Field(None, gt=0)
    tenant: str = ""
    user: str = ""
    vc: str = ""
    guaranteed: bool = False
    max_retries: int = Field(2, ge=0, le=100)
    env: dict[str, str] = Field(default_factory=dict)

    @field_validator("command")
    @classmethod
    def _template(cls, value: str) -> str:
        try:
            names = {name for _, name, _, _ in string.Formatter().parse(value) if name is not None}
        except ValueError as exc:
            raise ValueError(f"bad command template: {exc}") from None
        unknown = sorted(n for n in names if n not in TEMPLATE_FIELDS)
        if unknown:
            raise ValueError(f"unknown placeholder {{{unknown[0]}}}; known: {', '.join(TEMPLATE_FIELDS)}")
        return value

    @field_validator("plan")
    @classmethod
    def _plan(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return str(ExecutionPlan.parse(value))
        except ModelError as exc:
            raise ValueError(str(exc)) from None

    @model_validator(mode="after")
    def _consistent(self) -> JobFile:
        if self.iterations is None and self.duration is None:
            raise ValueError("a job needs 'iterations' (or an estimated 'duration' in seconds)")
        if self.plan is not None and self.resources is not None:
            plan = ExecutionPlan.parse(self.plan)
            if plan.gpus != self.resources.gpus:
                raise ValueError(f"plan uses {plan.gpus} GPUs but resources.gpus is {self.resources.gpus}")
        if self.model and self.global_batch is None:
            raise ValueError("a job that names a model needs its global_batch (plan-aware policies keep it fixed)")
        return self

    @property
    def execution_plan(self) -> ExecutionPlan | None:
        return ExecutionPlan.parse(self.plan) if self.plan else None

    @property
    def gpus(self) -> int:
        if self.resources is not None:
            return self.resources.gpus
        plan = self.execution_plan
        return plan.gpus if plan is not None else 1

    def spec(self, job_id: str, submit_time: float) -> JobSpec:
        """The engine's view of this job."""
        res = self.resources or ResourceRequest(gpus=self.gpus)
        return JobSpec(
            job_id=job_id,
            submit_time=submit_time,
            num_gpus=self.gpus,
            duration=self.duration,
            name=self.name,
            user=self.user,
            vc=self.vc,
            tenant=self.tenant,
            guaranteed=self.guaranteed,
            model=self.model,
            num_cpus=res.cpus,
            mem_gb=res.mem_gb,
            iterations=self.iterations,
            plan=self.execution_plan,
        )

    def to_json(self) -> str:
        return self.model_dump_json()


def parse_job(data: Any, source: str | None = None) -> JobFile:
    """Validate a parsed job document (a mapping); problems become one ``InputError``."""
    if not isinstance(data, dict):
        raise InputError("a job file must be a mapping with at least name, command and iterations", path=source)
    try:
        return JobFile.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or None
        message = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            message = f"unknown field; known: {', '.join(JobFile.model_fields)}"
        raise InputError(message, path=source, field=loc) from None


def parse_job_text(text: str, source: str | None = None) -> JobFile:
    """Parse YAML (or JSON, which is YAML) job text."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InputError(
            f"not valid YAML: {getattr(exc, 'problem', exc)}", path=source, line=mark.line + 1 if mark else None
        ) from None
    return parse_job(data, source)


def load_job_file(path: str | Path) -> JobFile:
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise InputError("job file not found", path=str(path)) from None
    except OSError as exc:
        raise InputError(f"cannot read job file: {exc.strerror}", path=str(path)) from None
    return parse_job_text(text, str(path))


def job_from_json(text: str) -> JobFile:
    """Rebuild a stored job (already validated when it was submitted)."""
    return JobFile.model_validate(json.loads(text))
