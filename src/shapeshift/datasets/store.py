"""Where a bundled data set's files are on disk, and how a name becomes a path.

The package holds each data set as one zstd-compressed tar (``bundled/``); the first use
unpacks it into a cache directory keyed by the archive's SHA-256, so later uses read plain
files and an upgraded package never reads a stale copy. The cache is
``$SHAPESHIFT_DATA_HOME``, else ``$XDG_CACHE_HOME/shapeshift/datasets``, else
``~/.cache/shapeshift/datasets``; where none can be written, a directory under the
system's temporary directory. Unpacking goes to a private directory renamed into place,
so processes starting together never see half a data set.
"""

from __future__ import annotations

import functools
import io
import json
import os
import shutil
import tarfile
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

from shapeshift.datasets.catalog import DATASETS, Dataset
from shapeshift.errors import InputError

_PACKAGE = resources.files("shapeshift.datasets")


@functools.cache
def manifest() -> dict[str, dict[str, Any]]:
    """Per data set: ``sha256`` of its archive, its ``files`` and ``rows``."""
    return json.loads(_PACKAGE.joinpath("bundled/manifest.json").read_text(encoding="utf-8"))


def names() -> list[str]:
    return sorted(DATASETS)


def get(name: str) -> Dataset:
    """The data set ``name``, or one line listing the names there are."""
    if name not in DATASETS:
        raise InputError(f"unknown data set {name!r}; bundled: {', '.join(names())}")
    return DATASETS[name]


def _cache_roots() -> list[Path]:
    roots = []
    if os.environ.get("SHAPESHIFT_DATA_HOME"):
        roots.append(Path(os.environ["SHAPESHIFT_DATA_HOME"]))
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    roots.append(Path(cache) / "shapeshift" / "datasets")
    roots.append(Path(tempfile.gettempdir()) / f"shapeshift-datasets-{os.getuid() if hasattr(os, 'getuid') else 0}")
    return roots


def _unpack(dataset: Dataset, target: Path) -> None:
    data = _PACKAGE.joinpath(f"bundled/{dataset.archive}").read_bytes()
    import zstandard

    raw = zstandard.ZstdDecompressor().decompress(data, max_output_size=1 << 31)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
            tar.extractall(staging, filter="data")
        try:
            staging.rename(target)
        except OSError:
            if not target.is_dir():  # not another process that got there first
                raise
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


@functools.cache
def directory(name: str) -> Path:
    """The unpacked directory of data set ``name`` (unpacked on first use)."""
    dataset = get(name)
    key = f"{name}-{manifest()[name]['sha256'][:16]}"
    failures = []
    for root in _cache_roots():
        target = root / key
        if target.is_dir():
            return target
        try:
            _unpack(dataset, target)
            return target
        except OSError as exc:
            failures.append(f"{root}: {exc.strerror or exc}")
    raise InputError(f"cannot unpack data set {name!r}: " + "; ".join(failures))


def path(name: str) -> Path:
    """What the name stands for: the data set's main file, or its directory."""
    dataset = get(name)
    root = directory(name)
    return root / dataset.main if dataset.main else root


def lookup(text: str | os.PathLike[str]) -> tuple[Dataset, Path] | None:
    """``(data set, path)`` when ``text`` names a bundled data set (``NAME``, or
    ``NAME/inner/path`` for a file inside it) and no file or directory of that name
    exists: a path always wins over a name. ``None`` otherwise."""
    text = os.fspath(text)
    if not text or Path(text).exists():
        return None
    head, _, inner = text.replace("\\", "/").partition("/")
    if head not in DATASETS:
        return None
    found = path(head) if not inner else directory(head) / inner
    if inner and not found.exists():
        listing = ", ".join(manifest()[head]["files"][:8])
        raise InputError(f"data set {head!r} has no file {inner!r}; it holds {listing}", field=text)
    return DATASETS[head], found


def locate(text: str | os.PathLike[str]) -> Path:
    """A path the user gave, or the bundled file or directory a data set name stands for.

    A word that is neither an existing path nor a data set name (no ``/`` and no file
    suffix, so it cannot be meant as a file) gets one line listing the names; anything
    else is returned as a path for the caller to report as missing in its own words."""
    found = lookup(text)
    if found is not None:
        return found[1]
    text = os.fspath(text)
    candidate = Path(text)
    if text and not candidate.exists() and "/" not in text and "\\" not in text and not candidate.suffix:
        raise InputError(f"{text!r} is neither a file nor a bundled data set; data sets: {', '.join(names())}")
    return candidate
