"""The search-space file of ``shapeshift tune run``.

```yaml
optimizer: adam        # adam | sgd
steps: 300             # training steps of every surrogate trial
target_steps: 300      # steps of the full-model target trial (default: steps)
batch_size: 16         # used unless batch_size is searched
sampler: grid          # grid | tpe | random  (optuna samplers)
pruner: none           # none | median | asha (optuna pruners; asha = SuccessiveHalvingPruner)
eager_transfer: 0.5    # fraction of surrogate trials finished before the target starts
seed: 0
space:
  lr: {type: grid, values: [0.001, 0.002, 0.004]}
  momentum: {type: uniform, low: 0.8, high: 0.99}
  weight_decay: {type: loguniform, low: 1.0e-6, high: 1.0e-2}
  batch_size: {type: choice, values: [16, 32]}
```

Every mistake is one ``InputError`` naming the file, its line and the key path
(``space.lr.low``), so the CLI prints one line and exits with status 2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shapeshift.errors import InputError
from shapeshift.yaml_lines import line_of, safe_load

#: Hyper-parameters the tuner can vary, with what each must be.
HYPER = {"lr": "positive", "momentum": "unit", "weight_decay": "nonnegative", "beta1": "unit",
         "batch_size": "count"}
KINDS = ("uniform", "loguniform", "choice", "grid")
TOP_KEYS = {"optimizer", "steps", "target_steps", "batch_size", "sampler", "pruner", "eager_transfer", "seed",
            "eval_batches", "space"}


@dataclass(frozen=True)
class Param:
    """One searched hyper-parameter: ``uniform``/``loguniform`` in [low, high], or a list."""

    name: str
    kind: str
    low: float | None = None
    high: float | None = None
    values: tuple[float, ...] = ()


@dataclass(frozen=True)
class SearchSpace:
    params: tuple[Param, ...]
    optimizer: str = "adam"
    steps: int = 300
    target_steps: int | None = None
    batch_size: int = 16
    sampler: str = "tpe"
    pruner: str = "none"
    eager_transfer: float = 0.5
    seed: int = 0
    eval_batches: int = 8
    source: str = field(default="", compare=False)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    def grid(self) -> dict[str, list[float]] | None:
        """The grid for optuna's GridSampler, when every parameter is a list."""
        if any(p.kind not in ("grid", "choice") for p in self.params):
            return None
        return {p.name: list(p.values) for p in self.params}


def _fail(message: str, text: str, path: str, key: tuple) -> InputError:
    return InputError(message, path=path, line=line_of(text, key), field=".".join(str(k) for k in key))


def _number(value: Any, rule: str, text: str, path: str, key: tuple) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _fail(f"must be a number, got {value!r}", text, path, key)
    value = float(value)
    if not math.isfinite(value):
        raise _fail(f"must be finite, got {value}", text, path, key)
    checks = {"positive": (value > 0, "positive"), "nonnegative": (value >= 0, "at least 0"),
              "unit": (0 <= value < 1, "in [0, 1)"), "count": (value >= 1 and value == int(value), "an integer >= 1"),
              "fraction": (0 < value <= 1, "in (0, 1]")}
    ok, wording = checks[rule]
    if not ok:
        raise _fail(f"must be {wording}, got {value:g}", text, path, key)
    return value


def _param(name: str, raw: Any, text: str, path: str) -> Param:
    key = ("space", name)
    if name not in HYPER:
        raise _fail(f"unknown hyper-parameter (known: {', '.join(HYPER)})", text, path, key)
    if not isinstance(raw, dict):
        raise _fail("must be a mapping such as {type: loguniform, low: 1e-4, high: 1e-1}", text, path, key)
    kind = raw.get("type")
    if kind not in KINDS:
        raise _fail(f"type must be one of {', '.join(KINDS)}, got {kind!r}", text, path, (*key, "type"))
    allowed = {"type", "values"} if kind in ("choice", "grid") else {"type", "low", "high"}
    for extra in sorted(set(raw) - allowed, key=str):
        raise _fail(f"unknown key for type {kind} (allowed: {', '.join(sorted(allowed))})", text, path, (*key, extra))
    rule = HYPER[name]
    if kind in ("choice", "grid"):
        values = raw.get("values")
        if not isinstance(values, list) or not values:
            raise _fail("values must be a non-empty list", text, path, (*key, "values"))
        numbers = tuple(_number(v, rule, text, path, (*key, "values", i)) for i, v in enumerate(values))
        if len(set(numbers)) != len(numbers):
            raise _fail("values repeat", text, path, (*key, "values"))
        return Param(name, kind, values=tuple(int(v) if rule == "count" else v for v in numbers))
    for bound in ("low", "high"):
        if bound not in raw:
            raise _fail(f"missing '{bound}'", text, path, (*key, bound))
    low = _number(raw["low"], rule, text, path, (*key, "low"))
    high = _number(raw["high"], rule, text, path, (*key, "high"))
    if high <= low:
        raise _fail(f"high ({high:g}) must exceed low ({low:g})", text, path, (*key, "high"))
    if kind == "loguniform" and low <= 0:
        raise _fail("loguniform needs low > 0", text, path, (*key, "low"))
    if rule == "count":
        raise _fail("batch_size must be searched with type choice or grid", text, path, (*key, "type"))
    return Param(name, kind, low=low, high=high)


def parse_space(text: str, path: str = "<space>") -> SearchSpace:
    """Validate a search-space document; raise InputError naming the key path."""
    try:
        doc = safe_load(text)
    except Exception as exc:  # yaml.YAMLError and its marks
        raise InputError(f"not valid YAML: {exc}", path=path) from exc
    if not isinstance(doc, dict):
        raise InputError("must be a mapping with a 'space' key", path=path)
    for key in sorted(set(doc) - TOP_KEYS, key=str):
        raise _fail(f"unknown key (known: {', '.join(sorted(TOP_KEYS))})", text, path, (key,))
    space = doc.get("space")
    if not isinstance(space, dict) or not space:
        raise _fail("must map hyper-parameter names to their ranges", text, path, ("space",))
    params = tuple(_param(str(name), raw, text, path) for name, raw in space.items())
    if "lr" not in space:
        raise _fail("the learning rate 'lr' must be searched (it is what muP transfers)", text, path, ("space",))
    choices = {"optimizer": ("adam", "sgd"), "sampler": ("grid", "tpe", "random"),
               "pruner": ("none", "median", "asha")}
    settings: dict[str, Any] = {}
    for key, allowed in choices.items():
        if key in doc:
            if doc[key] not in allowed:
                raise _fail(f"must be one of {', '.join(allowed)}, got {doc[key]!r}", text, path, (key,))
            settings[key] = doc[key]
    for key in ("steps", "target_steps", "batch_size", "eval_batches"):
        if key in doc:
            settings[key] = int(_number(doc[key], "count", text, path, (key,)))
    if "seed" in doc:
        if isinstance(doc["seed"], bool) or not isinstance(doc["seed"], int) or doc["seed"] < 0:
            raise _fail(f"must be an integer >= 0, got {doc['seed']!r}", text, path, ("seed",))
        settings["seed"] = doc["seed"]
    if "eager_transfer" in doc:
        settings["eager_transfer"] = _number(doc["eager_transfer"], "fraction", text, path, ("eager_transfer",))
    result = SearchSpace(params=params, source=path, **settings)
    if result.sampler == "grid" and result.grid() is None:
        raise _fail("the grid sampler needs every parameter as type grid or choice", text, path, ("sampler",))
    if "momentum" in space and result.optimizer != "sgd":
        raise _fail("momentum is searched only with optimizer: sgd (Adam's is beta1)", text, path,
                    ("space", "momentum"))
    return result


def load_space(path: str | Path) -> SearchSpace:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise InputError(f"cannot read the search-space file: {exc.strerror or exc}", path=str(path)) from exc
    return parse_space(text, str(path))
