"""Job files: what a user hands to ``shapeshift submit``.

A job file is validated completely before anything is stored, so a typo never leaves a
half-registered job behind: every problem becomes one ``InputError`` naming the field and
the reason. The command is a template (``{iterations}``, ``{job_id}``, ...) so the same
file can be relaunched with a new plan after a reconfiguration. The template is split
into words first (shell quoting) and each word is then filled in, so a value holding a
quote or a space never changes the word structure; at submission the template is
rendered completely with the job's own values, so every placeholder, format spec and
quote is checked before the job is stored, never at launch time hours later.
Every number has bounds and booleans are not numbers (``gpus: true`` is refused).
"""

from __future__ import annotations

import functools
import json
import shlex
import string
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from shapeshift.errors import InputError
from shapeshift.model import ExecutionPlan, JobSpec, ModelError
from shapeshift.safe_text import has_control
from shapeshift.yaml_lines import safe_load

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


#: Upper bounds: far beyond any real job, low enough that arithmetic on them stays exact.
MAX_GPUS = 100_000
MAX_ITERATIONS = 10**12
MAX_SECONDS = 10**9
#: Bytes of command line or environment a job may carry (Linux refuses ~128 KiB per string).
MAX_COMMAND = 64 * 1024
MAX_ENV = 64 * 1024
#: Default seconds without a metric report (after the first one) before a rank counts as hung.
DEFAULT_HEARTBEAT = 300.0


def _int(default: Any, ge: int, le: int) -> Any:
    return Field(default, ge=ge, le=le, strict=True)


def _float(default: Any, ge: float, le: float, gt: bool = False) -> Any:
    bound = {"gt": ge} if gt else {"ge": ge}
    return Field(default, le=le, strict=True, allow_inf_nan=False, **bound)


class ResourceRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    gpus: int = _int(1, 1, MAX_GPUS)
    cpus: float = _float(0.0, 0, 1e6)
    mem_gb: float = _float(0.0, 0, 1e9)


@functools.lru_cache(maxsize=1024)
def command_words(command: str) -> tuple[str, ...]:
    """The template split into words (shell quoting). Cached: ``shlex`` is pure Python,
    and a burst of submits or launches repeats a few templates (an error is not cached)."""
    return tuple(shlex.split(command))


def render_command(command: str, fields: dict[str, Any]) -> tuple[str, ...]:
    """The argv of one rank: split the template into words, then fill in each word."""
    return tuple(word.format(**fields) for word in command_words(command))


class JobFile(BaseModel):
    """A validated job file. ``resources`` or ``plan`` (or both, agreeing) set the GPU count."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(..., min_length=1, max_length=200)
    command: str = Field(..., min_length=1)
    resources: ResourceRequest | None = None
    model: str = ""
    global_batch: int | None = _int(None, 1, 10**9)
    plan: str | None = None
    iterations: int | None = _int(None, 1, MAX_ITERATIONS)
    duration: float | None = _float(None, 0, MAX_SECONDS, gt=True)
    tenant: str = Field("", max_length=200)
    user: str = Field("", max_length=200)
    vc: str = Field("", max_length=200)
    guaranteed: bool = Field(False, strict=True)
    max_retries: int = _int(2, 0, 100)
    #: Wall seconds one attempt may run (Slurm's ``TimeLimit``); then it is stopped and the
    #: job fails with "time limit exceeded" (not retried). None: no limit.
    time_limit: float | None = _float(None, 0, MAX_SECONDS, gt=True)
    #: Seconds without a metric report, counted from the attempt's first report, after
    #: which the attempt counts as hung: a failed rank, requeued from its checkpoint
    #: (counted against ``max_retries``). 0 turns it off; jobs that never report are exempt.
    heartbeat_timeout: float = _float(DEFAULT_HEARTBEAT, 0, MAX_SECONDS)
    env: dict[str, str] = Field(default_factory=dict)

    @field_validator("command")
    @classmethod
    def _template(cls, value: str) -> str:
        if "\0" in value:
            raise ValueError("the command holds a NUL byte")
        if len(value.encode()) > MAX_COMMAND:
            raise ValueError(f"the command is longer than {MAX_COMMAND} bytes")
        try:
            names = {name for _, name, _, _ in string.Formatter().parse(value) if name is not None}
        except ValueError as exc:
            raise ValueError(f"bad command template: {exc}") from None
        unknown = sorted(n for n in names if n not in TEMPLATE_FIELDS)
        if unknown:
            raise ValueError(f"unknown placeholder {{{unknown[0]}}}; known: {', '.join(TEMPLATE_FIELDS)}")
        try:
            words = command_words(value)
        except ValueError as exc:
            raise ValueError(f"bad command template: {exc}") from None
        if not words:
            raise ValueError("the command is empty")
        return value

    @field_validator("name", "tenant", "user", "vc")
    @classmethod
    def _printable(cls, value: str) -> str:
        bad = has_control(value)
        if bad is not None:
            raise ValueError(f"holds the control character {bad} (names are shown on terminals)")
        return value

    @field_validator("env")
    @classmethod
    def _env(cls, value: dict[str, str]) -> dict[str, str]:
        size = 0
        for key, item in value.items():
            if not key or "=" in key or "\0" in key:
                raise ValueError(f"bad variable name {key!r} (empty, or holds '=' or a NUL byte)")
            if "\0" in item:
                raise ValueError(f"the value of {key} holds a NUL byte")
            size += len(key.encode()) + len(item.encode()) + 2
        if size > MAX_ENV:
            raise ValueError(f"env is larger than {MAX_ENV} bytes")
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
        try:  # render with this job's own values: format specs and conversions are checked now
            render_command(self.command, self.template_values("0", "/checkpoint", 1, 0, "/usr/bin/python3"))
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            raise ValueError(f"bad command template: {exc}") from None
        return self

    def template_values(
        self, job_id: str, checkpoint_dir: str, world_size: int, rank: int, python: str
    ) -> dict[str, Any]:
        """The values a launch fills the command template with."""
        plan = self.execution_plan or ExecutionPlan(dp=max(self.gpus, 1))
        return {
            "job_id": job_id,
            "name": self.name,
            "iterations": self.iterations if self.iterations is not None else "",
            "global_batch": self.global_batch if self.global_batch is not None else "",
            "model": self.model,
            "plan": str(plan),
            "checkpoint_dir": checkpoint_dir,
            "world_size": world_size,
            "rank": rank,
            "python": python,
        }

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
        if loc is None and "command template" in err["msg"]:
            loc = "command"
        message = err["msg"].removeprefix("Value error, ")
        if err["type"] in ("int_type", "float_type", "bool_type") and isinstance(err.get("input"), bool):
            message = f"{message} (true/false is not a number)"
        if err["type"] == "extra_forbidden":
            message = f"unknown field; known: {', '.join(JobFile.model_fields)}"
        raise InputError(message, path=source, field=loc) from None


class _DuplicateKey(Exception):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object, refusing a key given twice (``json`` keeps the last silently)."""
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKey(key)
        result[key] = value
    return result


def load_document(text: str, source: str | None = None) -> Any:
    """JSON or YAML text as data. JSON (what the CLI sends) is tried first: YAML's
    pure-Python parser is about 20x slower, and JSON is YAML, so the result is the same."""
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except _DuplicateKey as exc:
        raise InputError(f"the key {exc.args[0]!r} is given twice", path=source) from None
    except ValueError:
        pass
    except RecursionError:  # nested past the parser's stack (a job file is a few levels deep)
        raise InputError("nested too deeply to be a job file", path=source) from None
    try:
        return safe_load(text)  # refuses a key given twice, as the JSON path does
    except RecursionError:
        raise InputError("nested too deeply to be a job file", path=source) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InputError(
            f"not valid YAML: {getattr(exc, 'problem', exc)}", path=source, line=mark.line + 1 if mark else None
        ) from None


def parse_job_text(text: str, source: str | None = None) -> JobFile:
    """Parse YAML (or JSON, which is YAML) job text."""
    return parse_job(load_document(text, source), source)


#: The key of a submit body that carries the client-chosen submission id (not a job field).
SUBMISSION_ID = "submission_id"


def parse_submission(
    text: str, source: str | None = None, overrides: dict[str, Any] | None = None
) -> tuple[JobFile, str | None]:
    """A submit body: a job document plus an optional ``submission_id`` (1-128 characters
    of letters, digits and ``._:-``), which makes retrying the submit safe. ``overrides``
    replace job fields before the one validation (the token's user and tenant)."""
    data = load_document(text, source)
    submission_id = None
    if isinstance(data, dict) and overrides:
        data = {**data, **overrides}
    if isinstance(data, dict) and SUBMISSION_ID in data:
        data = dict(data)
        submission_id = check_submission_id(data.pop(SUBMISSION_ID), SUBMISSION_ID, source)
    return parse_job(data, source), submission_id


def check_submission_id(value: object, field: str, source: str | None = None) -> str:
    """A submission id: 1-128 characters of letters, digits and ``._:-``. The
    ``Idempotency-Key`` header's form, a quoted string (RFC 8941), is unquoted first."""
    if isinstance(value, str) and field != SUBMISSION_ID and len(value) >= 2 and value[0] == value[-1] == '"':
        value = value[1:-1]
    if (
        not isinstance(value, str)
        or not 1 <= len(value) <= 128
        or not all(c.isascii() and (c.isalnum() or c in "._:-") for c in value)
    ):
        raise InputError("must be 1-128 characters of letters, digits and ._:-", path=source, field=field)
    return value


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
