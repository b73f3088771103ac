"""Named policies with typed, validated parameters.

Each policy module registers a factory and a pydantic model of its parameters; the
CLI and experiment files refer to policies by name and pass ``key=value`` strings,
which pydantic converts and checks (unknown keys and bad values are errors that list
what is accepted). Adding a policy means one package plus one line in
``BUILTIN_POLICIES`` (CONTRIBUTING.md, "Adding a policy").
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel, ConfigDict, ValidationError

from shapeshift.errors import InputError
from shapeshift.policies.framework.base import Policy

#: Every built-in policy name and the module whose import registers it. Adding a policy is
#: one package plus one line here. Building a policy imports its own module only, so a FIFO
#: run never loads the plan-aware models.
BUILTIN_POLICIES: dict[str, str] = {
    "fifo": "shapeshift.policies.framework.fifo",
    "rubick": "shapeshift.policies.planaware.rubick",
    "rubick-e": "shapeshift.policies.planaware.rubick",
    "rubick-r": "shapeshift.policies.planaware.rubick",
    "rubick-n": "shapeshift.policies.planaware.rubick",
    "antman": "shapeshift.policies.planaware.antman",
    "synergy": "shapeshift.policies.planaware.synergy",
    "sia": "shapeshift.policies.goodput.sia",
    "sjf": "shapeshift.policies.size_based.sjf",
    "srtf": "shapeshift.policies.size_based.sjf",
    "qssf": "shapeshift.policies.size_based.qssf",
    "las": "shapeshift.policies.size_based.las",
    "tiresias": "shapeshift.policies.tiresias.policy",
    "themis": "shapeshift.policies.themis.policy",
    "gavel": "shapeshift.policies.gavel.policy",
    "optimus": "shapeshift.policies.goodput.optimus",
    "pollux": "shapeshift.policies.goodput.pollux",
    "auto": "shapeshift.policies.auto.policy",
    "lucid": "shapeshift.policies.lucid.policy",
    "slurm": "shapeshift.policies.slurm.policy",
    "kueue": "shapeshift.policies.k8s.policy",
    "kai": "shapeshift.policies.k8s.policy",
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
    #: Throughput models (``--throughput`` kinds) under which what this policy decides
    #: changes how fast jobs run; empty: any model. Under another model the policy still
    #: runs, and ``speed_note`` says what the result then does not show.
    speed_models: tuple[str, ...] = ()
    speed_note: str = ""

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
    name: str,
    description: str,
    params: type[PolicyParams],
    *,
    speed_models: tuple[str, ...] = (),
    speed_note: str = "",
) -> Callable[[Callable[[Any], Policy]], Callable[[Any], Policy]]:
    """Register ``factory`` under ``name``; ``speed_models``/``speed_note`` as in ``PolicyInfo``."""

    def wrap(factory: Callable[[Any], Policy]) -> Callable[[Any], Policy]:
        if name in _REGISTRY:
            raise ValueError(f"policy {name!r} registered twice")
        _REGISTRY[name] = PolicyInfo(name, description, params, factory, speed_models, speed_note)
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


def _container(annotation: Any) -> type | None:
    """``list``, ``tuple``, ``set``, ``frozenset`` or ``dict`` when a parameter is one (an
    optional one included); ``None`` for scalars."""
    origin = get_origin(annotation)
    if origin in (list, tuple, set, frozenset, dict):
        return origin
    if origin is not None and origin is not Literal:
        found = {_container(arg) for arg in get_args(annotation)} - {None}
        return found.pop() if len(found) == 1 else None
    return None


def _is_none_word(value: object) -> bool:
    return isinstance(value, str) and value.strip().lower() == "none"


def _typed_values(info: PolicyInfo, args: Mapping[str, Any]) -> dict[str, Any]:
    """Command-line text as typed values: ``none`` for a parameter that may be None, and
    list and mapping parameters as lists and mappings:
    ``3250,7200`` or JSON ``[3250, 7200]`` for a list; ``a:1,b:2`` or JSON
    ``{"a": 1}`` for a mapping; nothing after ``=`` for an empty one. Elements are then
    checked by the parameter model."""
    fields = {f.alias or key: f for key, f in info.params.model_fields.items()}
    out = dict(args)
    for key, value in args.items():
        if key in fields and _is_none_word(value) and type(None) in get_args(fields[key].annotation):
            out[key] = None  # ``name=none`` turns off a parameter whose off value is None
            continue
        kind = _container(fields[key].annotation) if key in fields else None
        if kind is None or not isinstance(value, str):
            continue
        text = value.strip()
        if text.startswith(("[", "{")):  # not text[:1] in "[{": "" is in every string
            try:
                out[key] = json.loads(text)
            except json.JSONDecodeError as exc:
                message = f"policy {info.name}: {key}={value!r} is not valid JSON ({exc.msg})"
                raise InputError(message, field=key) from None
        elif kind is dict:
            pairs = [item.partition(":") for item in text.split(",") if item.strip()]
            bad = next((k for k, sep, _ in pairs if not sep or not k.strip()), None)
            if bad is not None:
                raise InputError(
                    f"policy {info.name}: {key} takes key:value pairs separated by commas, got {bad.strip()!r}",
                    field=key,
                )
            out[key] = {k.strip(): v.strip() for k, _, v in pairs}
        else:
            out[key] = [item.strip() for item in text.split(",") if item.strip()]
    return out


def _problem(name: str, info: PolicyInfo, exc: ValidationError) -> InputError:
    """The first validation problem as one line naming the parameter (and the element of a
    list parameter: ``thresholds element 2 ('x')``)."""
    err = exc.errors()[0]
    loc = list(err["loc"])
    where = ""  # the parameter itself is the error's field; an element of a list is named here
    if len(loc) > 1 and isinstance(loc[1], int):
        where = f"{loc[0]} element {loc[1] + 1} ({err.get('input')!r}): "
    accepted = ", ".join(f"{k} ({t}, default {d!r})" for k, t, d in info.parameters()) or "none"
    message = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        message = "unknown parameter"
    field = ".".join(str(p) for p in loc) or "?"
    return InputError(f"policy {name}: {where}{message}; parameters: {accepted}", field=field)


def make_policy(name: str, args: Mapping[str, Any] | None = None) -> Policy:
    """Build a registered policy, validating its parameters."""
    info = policy_info(name)
    values = _typed_values(info, dict(args or {}))
    try:
        params = info.params.model_validate(values)
    except ValidationError as exc:
        raise _problem(name, info, exc) from None
    return info.factory(params)
