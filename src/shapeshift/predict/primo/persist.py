"""Saving and loading Primo models as JSON: data only, so loading a file runs none of its code.

A pickle from an untrusted path can execute anything; a Primo model is a handful of
tables or tree arrays, so the file is plain JSON::

    {"format": "shapeshift-primo", "version": 1, "kind": "pram-regressor",
     "params": {...}, "feature_names": [...], "form": {...}, "meta": {...}}

``kind`` picks the class from a fixed table (never an import path from the file),
``params`` are checked against that class's own parameters, and every array is rebuilt
and checked by the form. Anything malformed is one ``InputError`` naming the file and
the field. ``meta`` is free-form and carried through (the CLI stores the target's
transform and the training summary there).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from shapeshift.errors import InputError
from shapeshift.predict.primo.base import PrimoModel
from shapeshift.predict.primo.pram import PrAMClassifier, PrAMRegressor
from shapeshift.predict.primo.prdt import PrDTClassifier, PrDTRegressor

FORMAT = "shapeshift-primo"
VERSION = 1
KINDS: dict[str, type[PrimoModel]] = {
    cls.kind: cls for cls in (PrAMRegressor, PrAMClassifier, PrDTRegressor, PrDTClassifier)
}


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    return True


def model_to_json(model: PrimoModel, meta: dict[str, Any] | None = None) -> str:
    data = {"format": FORMAT, "version": VERSION, **model.to_dict(), "meta": meta or {}}
    return json.dumps(data, indent=1, sort_keys=True, default=_plain)


def _plain(value: Any) -> Any:
    """JSON for the few non-JSON values params may hold (tuples come through as lists)."""
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"cannot save {type(value).__name__} in a model file")


def save(model: PrimoModel, path: str | Path, meta: dict[str, Any] | None = None) -> Path:
    """Write ``model`` (fitted) to ``path`` as JSON; returns the path."""
    target = Path(path)
    target.write_text(model_to_json(model, meta) + "\n")
    return target


def model_from_dict(data: Any, source: str = "<model>") -> tuple[PrimoModel, dict[str, Any]]:
    """Rebuild a model (and its ``meta``) from parsed JSON, refusing anything unexpected."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise InputError(f'not a Shapeshift Primo model (expected "format": "{FORMAT}")', path=source)
    if data.get("version") != VERSION:
        raise InputError(
            f"unsupported model version {data.get('version')!r}; this build reads {VERSION}",
            path=source,
            field="version",
        )
    kind = data.get("kind")
    cls = KINDS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise InputError(f"unknown model kind {kind!r}; known: {', '.join(sorted(KINDS))}", path=source, field="kind")
    params = data.get("params")
    if not isinstance(params, dict):
        raise InputError("params must be an object", path=source, field="params")
    known = cls().get_params(deep=False)
    for name in params:
        if name not in known:
            raise InputError(f"unknown parameter {name!r} for {kind}", path=source, field=f"params.{name}")
    if not _finite(data.get("form")):
        raise InputError("non-finite number in the model tables", path=source, field="form")
    model = cls(**params)
    try:
        model._restore(data)
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise InputError(f"malformed model: {exc}", path=source, field="form") from None
    meta = data.get("meta") or {}
    if not isinstance(meta, dict):
        raise InputError("meta must be an object", path=source, field="meta")
    return model, meta


def load(path: str | Path) -> tuple[PrimoModel, dict[str, Any]]:
    """Read a model saved by ``save``: ``(model, meta)``."""
    source = str(path)
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise InputError(f"cannot read model: {exc.strerror or exc}", path=source) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON: {exc.msg}", path=source, line=exc.lineno) from None
    return model_from_dict(data, source)
