"""Build the bundled data sets (``src/shapeshift/datasets/bundled``) from ``../shared``.

    python scripts/bundle_datasets.py [--shared ../shared]

Each data set of ``shapeshift.datasets.catalog`` becomes one zstd-compressed tar of its
files, written byte for byte the same on every run (sorted members, zero times and
owners, fixed compression level), and ``manifest.json`` records each archive's SHA-256,
its files and its row count (data rows of its CSV files, nodes of a cluster file).
Only data whose licence allows redistribution is listed here; see the catalog.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import sys
import tarfile
from pathlib import Path

import yaml
import zstandard

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "src/shapeshift/datasets/bundled"
LEVEL = 19

#: data set -> (path under ../shared, name inside the archive) for each of its files.
SOURCES: dict[str, list[tuple[str, str]]] = {
    "philly": [("data/philly/philly_jobs.csv", "philly_jobs.csv")],
    "philly-vcs": [
        ("examples/cluster-philly-vcs.yaml", "cluster-philly-vcs.yaml"),
        ("data/helios/philly_vc.csv", "philly_vc.csv"),
    ],
    "philly-node-sequence": [("data/helios/philly_node_sequence.csv", "philly_node_sequence.csv")],
    "helios-cluster-summary": [("data/helios/helios_cluster_summary.csv", "helios_cluster_summary.csv")],
    "pollux-workload6": [("data/pollux/workload-6.csv", "workload-6.csv")],
    "pollux-profiles": [("data/pollux/profiles", "")],
    "rubick-base": [("data/rubick/workloads/workload-base.csv", "workload-base.csv")],
    "rubick-bp": [("data/rubick/workloads/workload-bp.csv", "workload-bp.csv")],
    "rubick-mt": [("data/rubick/workloads/workload-mt.csv", "workload-mt.csv")],
    "rubick-naive": [("data/rubick/workloads/naive.csv", "naive.csv")],
    "rubick-a800": [("examples/cluster-a800-8x8.yaml", "cluster-a800-8x8.yaml")],
    "rubick-a800-tables": [("data/rubick/traces", "")],
    "rubick-fitting": [("data/rubick/fitting", "")],
    "rubick-models": [("data/rubick/models.csv", "models.csv")],
}


def _files(shared: Path, name: str) -> list[tuple[Path, str]]:
    found = []
    for source, arcname in SOURCES[name]:
        path = shared / source
        if path.is_dir():
            found += [(p, str(p.relative_to(path))) for p in sorted(path.rglob("*")) if p.is_file()]
        else:
            found.append((path, arcname))
    return sorted(found, key=lambda item: item[1])


def _rows(path: Path, data: bytes) -> int:
    if path.suffix == ".csv":
        return max(0, sum(1 for line in data.decode("utf-8").splitlines() if line.strip()) - 1)
    if path.suffix == ".yaml":
        return sum(int(group.get("count", 1)) for group in yaml.safe_load(data)["nodes"])
    return 0


def bundle(shared: Path, name: str, main: str | None) -> dict[str, object]:
    """Write ``<name>.tar.zst``; rows count the ``main`` file's, or every file's without one."""
    buffer = io.BytesIO()
    rows = 0
    files = []
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path, arcname in _files(shared, name):
            data = path.read_bytes()
            info = tarfile.TarInfo(arcname)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
            if main is None or arcname == main:
                rows += _rows(path, data)
            files.append(arcname)
    compressed = zstandard.ZstdCompressor(level=LEVEL).compress(buffer.getvalue())
    (OUT / f"{name}.tar.zst").write_bytes(compressed)
    return {"sha256": hashlib.sha256(compressed).hexdigest(), "rows": rows, "files": files}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    args = parser.parse_args(argv)
    if not (args.shared / "data").is_dir():
        print(f"{args.shared}/data not found", file=sys.stderr)
        return 2
    sys.path.insert(0, str(ROOT / "src"))
    from shapeshift.datasets.catalog import DATASETS

    missing = sorted(set(DATASETS) ^ set(SOURCES))
    if missing:
        print(f"catalog and sources disagree on: {', '.join(missing)}", file=sys.stderr)
        return 2
    OUT.mkdir(parents=True, exist_ok=True)
    manifest = {name: bundle(args.shared, name, DATASETS[name].main) for name in sorted(DATASETS)}
    (OUT / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    total = sum((OUT / f"{n}.tar.zst").stat().st_size for n in manifest)
    print(f"wrote {len(manifest)} data sets, {total / 1e6:.2f} MB, to {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
