"""Writing a bundled data set out as files, with the licence and citation it ships under."""

from __future__ import annotations

import shutil
from importlib import resources
from pathlib import Path

from shapeshift.datasets.catalog import Dataset
from shapeshift.datasets.store import directory, get, manifest


def licence_text(dataset: Dataset) -> str:
    """The full licence text, with the copyright holder where the licence names one."""
    template = resources.files("shapeshift.datasets").joinpath(f"licences/{dataset.licence}.txt")
    return template.read_text(encoding="utf-8").replace("{copyright}", dataset.copyright)


def about_text(dataset: Dataset) -> str:
    lines = [
        f"{dataset.name}: {dataset.description}",
        f"Source: {dataset.source}",
        f"Licence: {dataset.licence} ({dataset.copyright}); see LICENSE",
        f"Cite: {dataset.citation}",
    ]
    if dataset.setting is not None:
        lines.append(f"Evaluation setting: {dataset.setting.source}")
    lines.append("Exported by Shapeshift (shapeshift datasets export); the files are as published.")
    return "\n".join(lines) + "\n"


def export(name: str, out: str | Path) -> list[Path]:
    """Copy data set ``name`` into directory ``out`` with ``LICENSE``, ``CITATION.txt`` and
    ``README.txt``; returns the paths written. Existing files of the same names are replaced."""
    dataset = get(name)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    source = directory(name)
    written = []
    for relative in manifest()[name]["files"]:
        target = out / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / relative, target)
        written.append(target)
    for filename, text in (
        ("LICENSE", licence_text(dataset)),
        ("CITATION.txt", dataset.citation + "\n"),
        ("README.txt", about_text(dataset)),
    ):
        (out / filename).write_text(text, encoding="utf-8")
        written.append(out / filename)
    return written
