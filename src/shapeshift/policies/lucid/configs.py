"""Per-configuration sharing profiles for Lucid, read from a user's profile file.

The Lucid artifact (S-Lab-System-Group/Lucid, ``simulation/policy/lucid.py``,
``obtain_colocate_analysis``) scores each profiled *configuration*, not each model: a
job's sharing score is the label of the row of ``analyzer/single_data.csv`` with its
model, dataset, batch size and AMP flag, and its GPU memory is that configuration's.
Batch size and mixed precision move a job's GPU use as much as the model does, so two
jobs of one model can score Tiny and Jumbo. Shapeshift's catalog holds one profile per
model; a user who has per-configuration measurements points Lucid at them with
``profiles=PATH``. The file stays the user's: nothing of it is bundled.

The file is a CSV in the artifact's column layout: ``model, dataset, batchsize, amp,
gpu_util, gmem_util, gmem`` (utilisations in percent, as nvidia-smi reports them; GPU
memory in MiB) and, optionally,

* ``label``: the configuration's sharing score (0 Tiny, 1 Medium, 2 Jumbo), as the
  artifact's ``single_data.csv`` carries it. Without it Lucid's packing model (the PrDT)
  scores the configuration's own figures;
* ``job_id``: the row is that job's configuration, as in the artifact's trace
  (``cluster_full_log.csv``, where every job carries its configuration).

A job's configuration is, in order: its ``job_id`` row; else the configuration rows of
its model (case-insensitive), narrowed to its batch size where the job has one
(``JobSpec.batch``). When the rows left are one configuration, or several that agree on
the label, the job is scored by them (their first row's figures); otherwise, and for a
model the file lacks, the job falls back to its model's profile (per model).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

from shapeshift.errors import InputError
from shapeshift.model import JobSpec
from shapeshift.perf.colocation import SharingProfile

COLUMNS = ("model", "dataset", "batchsize", "amp", "gpu_util", "gmem_util", "gmem")
MIB_PER_GB = 1024.0


@dataclass(frozen=True)
class Configuration:
    """One profiled configuration: what it is, its figures alone, its label if given."""

    model: str
    dataset: str
    batch_size: int
    amp: bool
    profile: SharingProfile
    label: int | None = None


@dataclass(frozen=True)
class ConfigProfiles:
    """Configurations by job id and by model (rows in file order)."""

    by_job: dict[str, Configuration]
    by_model: dict[str, tuple[Configuration, ...]]

    def of(self, spec: JobSpec) -> Configuration | None:
        """``spec``'s configuration, or ``None`` (score it per model); see the module doc."""
        hit = self.by_job.get(spec.job_id)
        if hit is not None:
            return hit
        rows = self.by_model.get(spec.model.strip().lower(), ())
        if spec.batch is not None:
            rows = tuple(c for c in rows if c.batch_size == spec.batch.size)
        if not rows:
            return None
        if len({c.label for c in rows}) == 1 and (rows[0].label is not None or len(rows) == 1):
            return rows[0]
        return None

    @classmethod
    def read(cls, path: str | Path) -> ConfigProfiles:
        """Read the profile file; a bad row is an ``InputError`` naming line and field."""
        path = Path(path)
        try:
            text = path.read_text()
        except OSError as exc:
            raise InputError(f"cannot read Lucid profiles: {exc.strerror}", path=str(path)) from None
        except UnicodeDecodeError:
            raise InputError("Lucid profiles are not UTF-8 text", path=str(path)) from None
        rows = csv.DictReader(text.splitlines())
        fields = set(rows.fieldnames or ())
        missing = [c for c in COLUMNS if c not in fields]
        if missing:
            raise InputError(f"Lucid profiles lack columns {missing}", path=str(path), line=1)
        by_job: dict[str, Configuration] = {}
        by_model: dict[str, list[Configuration]] = {}
        for line, row in enumerate(rows, start=2):
            config = _configuration(row, str(path), line, "label" in fields)
            job_id = (row.get("job_id") or "").strip()
            if job_id:
                if job_id in by_job:
                    raise InputError(f"job {job_id!r} is listed twice", path=str(path), line=line, field="job_id")
                by_job[job_id] = config
            else:
                by_model.setdefault(config.model.lower(), []).append(config)
        if not by_job and not by_model:
            raise InputError("Lucid profiles list no configuration", path=str(path))
        return cls(by_job, {m: tuple(c) for m, c in by_model.items()})


def _number(row: dict, field: str, path: str, line: int, low: float, high: float) -> float:  # type: ignore[type-arg]
    raw = (row.get(field) or "").strip()
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and low <= value <= high):
        raise InputError(f"must be a number in [{low:g}, {high:g}], got {raw!r}", path=path, line=line, field=field)
    return value


def _configuration(row: dict, path: str, line: int, labelled: bool) -> Configuration:  # type: ignore[type-arg]
    model = (row.get("model") or "").strip()
    if not model:
        raise InputError("model must not be empty", path=path, line=line, field="model")
    batch = _number(row, "batchsize", path, line, 1, math.inf)
    if batch != int(batch):
        raise InputError(f"must be a whole number, got {row['batchsize']!r}", path=path, line=line, field="batchsize")
    amp = _number(row, "amp", path, line, 0, 1)
    if amp not in (0, 1):
        raise InputError(f"must be 0 or 1, got {row['amp']!r}", path=path, line=line, field="amp")
    profile = SharingProfile(
        _number(row, "gpu_util", path, line, 0, 100) / 100.0,
        _number(row, "gmem_util", path, line, 0, 100) / 100.0,
        _number(row, "gmem", path, line, 0, math.inf) / MIB_PER_GB,
        f"{model} {row.get('dataset', '').strip()} batch {int(batch)}{' AMP' if amp else ''}",
    )
    label = None
    if labelled and (row.get("label") or "").strip():
        value = _number(row, "label", path, line, 0, 2)
        if value not in (0, 1, 2):
            raise InputError(f"must be 0, 1 or 2, got {row['label']!r}", path=path, line=line, field="label")
        label = int(value)
    return Configuration(model, (row.get("dataset") or "").strip(), int(batch), bool(amp), profile, label)
