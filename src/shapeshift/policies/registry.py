"""Named policies with typed, validated parameters.

Each policy module registers a factory and a pydantic model of its parameters; the
CLI and experiment files refer to policies by name and pass ``key=value`` strings,
which pydantic converts and checks (unknown keys and bad values are errors that list
what is accepted). Adding a policy means one module plus one line in
``BUILTIN_MODULES``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel, ConfigDict, ValidationError

from shapeshift.errors import InputError
from shapeshift.policies.base import Policy

#: Every built-in policy name and the module whose import registers it. Adding a policy is
#: one module plus one line here. Building a policy imports its own module only, so a FIFO
#: run never loads the plan-aware models.
BUILTIN_POLICIES: dict[str, str] = {
    "fifo": "shapeshift.policies.fifo",
    "rubick": "shapeshift.policies.planaware.rubick",
    "rubick-e": "shapeshift.policies.planaware.rubick",
    "rubick-r": "shapeshift.policies.planaware.rubick",
    "rubick-n": "shapeshift.policies.planaware.rubick",
    "antman": "shapeshift.policies.planaware.antman",
    "synergy": "shapeshift.policies.planaware.synergy",
    "sia": "shapeshift.policies.planaware.sia",
    "sjf": "shapeshift.policies.sjf",
    "srtf": "shapeshift.policies.sjf",
    "qssf": "shapeshift.policies.qssf",
    "las": "shapeshift.policies.las",
    "tiresias": "shapeshift.policies.tiresias",
    "themis": "shapeshift.policies.themis",
    "gavel": "shapeshift.policies.gavel",
    "optimus": "shapeshift.policies.optimus",
    "pollux": "shapeshift.policies.pollux",
    "auto": "shapeshift.policies.auto",
    "lucid": "shapeshift.policies.lucid.policy",
    "slurm": "shapeshift.policies.slurm.policy",
}
#: Modules whose import registers the built-in policies.
BUILTIN_MODULES: tuple[str, ...] = tuple(dict.fromkeys(BUILTIN_POLICIES.values()))


class PolicyParams(BaseModel):
    """Base for policy parameter models: unknown keys are rejected."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True)
class PolicyInfo:
    name: str
    description: str
    params: type[PolicyParams]
    factory: Callable[[Any], Policy]

    def parameters(self) -> list[tuple[str, str, Any]]:
        """(name, type, default) of every parameter, for ``shapeshift policies``."""
        result = []
        for key, f in self.params.model_fields.items():
            if get_origin(f.annotation) is Literal:
                kind = "|".join(str(a) for a in get_args(f.annotation))
            else:
                kind = getattr(f.annotation, "__name__", None) or str(f.annotation).replace("typing.", "")
            result.append((f.alias or key, kind, f.get_default(call_default_factory=True)))  # users type the alias
        return result


_REGISTRY: dict[str, PolicyInfo] = {}
_loaded = False


def register(
    name: str, description: str, params: type[PolicyParams]
) -> Callable[[Callable[[Any], Policy]], Callable[[Any], Policy]]:
    def wrap(factory: Callable[[Any], Policy]) -> Callable[[Any], Policy]:
        if name in _REGISTRY:
            raise ValueError(f"policy {name!r} registered twice")
        _REGISTRY[name] = PolicyInfo(name, description, params, factory)
        return factory

    return wrap


def registry() -> Mapping[str, PolicyInfo]:
    global _loaded
    if not _loaded:
        for module in BUILTIN_MODULES:
            importlib.import_module(module)
        _loaded = True
    return dict(sorted(_REGISTRY.items()))


def parse_policy_args(items: list[str] | None) -> dict[str, str]:
    """``["backfill=true", "placement=scattered"]`` -> dict; malformed items are errors."""
    args: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InputError(f"--policy-arg {item!r} must look like key=value")
        args[key.strip()] = value.strip()
    return args


def policy_info(name: str) -> PolicyInfo:
    """The registry entry of ``name``, importing only its module when it is a built-in."""
    if name not in _REGISTRY and name in BUILTIN_POLICIES:
        importlib.import_module(BUILTIN_POLICIES[name])
    if name not in _REGISTRY:
        known = registry()
        if name not in known:
            raise InputError(f"unknown policy {name!r}; known: {', '.join(known)}")
    return _REGISTRY[name]


def make_policy(name: str, args: Mapping[str, Any] | None = None) -> Policy:
    """Build a registered policy, validating its parameters."""
    info = policy_info(name)
    try:
        params = info.params.model_validate(dict(args or {}))
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(p) for p in err["loc"]) or "?"
        accepted = ", ".join(f"{k} ({t}, default {d!r})" for k, t, d in info.parameters()) or "none"
        message = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            message = "unknown parameter"
        raise InputError(f"policy {name}: {message}; parameters: {accepted}", field=key) from None
    return info.factory(params)
