"""The bundled data sets: what ships, how names resolve, and what an export writes."""

from __future__ import annotations

import hashlib
from importlib import resources
from pathlib import Path

import pytest

from shapeshift import datasets
from shapeshift.cli.main import app
from shapeshift.errors import InputError
from shapeshift.workloads.readers import read_workload
from tests.conftest import SHARED

BUNDLED = resources.files("shapeshift.datasets").joinpath("bundled")

#: Published sizes, from each source's own description (../shared/data/README.md and the
#: papers): Philly's 82,247 readable jobs (the file has one blank line after them),
#: Pollux workload-6's 160 jobs, Rubick's 406-job traces and 10-job smoke trace, the
#: Helios Philly cluster's 352 nodes, Rubick's 8 A800 servers and seven models.
PUBLISHED_ROWS = {
    "philly": 82_247,
    "pollux-workload6": 160,
    "rubick-base": 406,
    "rubick-bp": 406,
    "rubick-mt": 406,
    "rubick-naive": 10,
    "philly-vcs": 352,
    "rubick-a800": 8,
    "rubick-models": 7,
}


def test_every_data_set_ships_with_a_matching_archive_licence_and_citation():
    for name in datasets.names():
        dataset = datasets.get(name)
        archive = BUNDLED.joinpath(dataset.archive).read_bytes()
        assert hashlib.sha256(archive).hexdigest() == datasets.manifest()[name]["sha256"], name
        assert dataset.licence in {"MIT", "Apache-2.0", "CC-BY-4.0"}, name
        assert dataset.citation and dataset.source and dataset.description, name


def test_row_counts_are_the_published_sizes():
    for name, rows in PUBLISHED_ROWS.items():
        assert datasets.rows(name) == rows, name


def test_the_alibaba_trace_is_not_bundled():
    # Its terms allow research use only: the product reads it from a user's path.
    assert not any("alibaba" in name or "openb" in name for name in datasets.names())
    assert not any("openb" in f for entry in datasets.manifest().values() for f in entry["files"])


def test_names_resolve_to_files_and_to_files_inside_a_directory():
    assert datasets.locate("philly").name == "philly_jobs.csv"
    assert datasets.locate("rubick-a800-tables").is_dir()
    inner = datasets.locate("rubick-a800-tables/gpt2/placements.csv")
    assert inner.is_file() and inner.parent.name == "gpt2"


def test_a_name_reads_as_the_workload_it_stands_for():
    workload = read_workload("rubick-naive")
    assert workload.name == "rubick-naive" and len(workload) == 10


def test_an_existing_path_wins_over_a_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("philly").write_text("job_id,submit_time,num_gpus,duration\na,0,1,10\nb,5,2,20\n")
    workload = read_workload("philly")  # the local two-job file, not the 82,247-job trace
    assert len(workload) == 2


def test_an_unknown_name_is_one_line_listing_the_names():
    with pytest.raises(InputError) as caught:
        datasets.locate("phily")
    message = str(caught.value)
    assert "phily" in message and "philly" in message and "rubick-base" in message and "\n" not in message


def test_a_missing_file_inside_a_data_set_names_what_it_holds():
    with pytest.raises(InputError, match=r"has no file 'nope\.csv'"):
        datasets.locate("rubick-a800-tables/nope.csv")


def test_a_word_with_a_suffix_is_left_to_the_caller_as_a_missing_file():
    assert datasets.locate("missing.csv") == Path("missing.csv")


def test_a_workload_name_where_a_cluster_is_expected_is_refused():
    from shapeshift.cluster import load_cluster

    with pytest.raises(InputError, match="not a cluster"):
        load_cluster("philly")
    assert load_cluster("rubick-a800").total_gpus == 64


def test_unpacking_into_an_empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SHAPESHIFT_DATA_HOME", str(tmp_path))
    datasets.store.directory.cache_clear()
    try:
        found = datasets.path("rubick-models")
        assert found.is_file() and tmp_path in found.parents
        assert found.read_text().count("\n") >= 8  # header + seven models
        assert datasets.path("rubick-models") == found  # the second use reads the same files
    finally:
        datasets.store.directory.cache_clear()


def test_the_bundled_files_are_the_published_files():
    if not (SHARED / "data").is_dir():
        pytest.skip("../shared is only in the project checkout and CI")
    pairs = {
        "philly": "data/philly/philly_jobs.csv",
        "rubick-base": "data/rubick/workloads/workload-base.csv",
        "pollux-workload6": "data/pollux/workload-6.csv",
        "rubick-a800-tables/t5/placements.csv": "data/rubick/traces/t5/placements.csv",
        "pollux-profiles/bert/placements.csv": "data/pollux/profiles/bert/placements.csv",
        "philly-node-sequence": "data/helios/philly_node_sequence.csv",
    }
    for name, relative in pairs.items():
        assert datasets.locate(name).read_bytes() == (SHARED / relative).read_bytes(), name


def test_export_writes_the_files_with_licence_and_citation(tmp_path):
    written = datasets.export("philly-vcs", tmp_path)
    names = {p.name for p in written}
    assert {"cluster-philly-vcs.yaml", "philly_vc.csv", "LICENSE", "CITATION.txt", "README.txt"} <= names
    licence = (tmp_path / "LICENSE").read_text()
    assert licence.startswith("MIT License") and "S-Lab System Group" in licence and "{copyright}" not in licence
    assert "Characterization and Prediction" in (tmp_path / "CITATION.txt").read_text()
    apache = datasets.export("rubick-naive", tmp_path / "r")
    assert "Apache License" in (tmp_path / "r" / "LICENSE").read_text() and len(apache) == 4


def test_datasets_commands(tmp_path):
    from typer.testing import CliRunner

    runner = CliRunner()
    listed = runner.invoke(app, ["datasets", "list", "--json"])
    assert listed.exit_code == 0
    assert '"name": "pollux-workload6"' in listed.output and '"licence": "Apache-2.0"' in listed.output
    done = runner.invoke(app, ["datasets", "export", "rubick-a800", str(tmp_path / "out")])
    assert done.exit_code == 0 and (tmp_path / "out" / "cluster-a800-8x8.yaml").is_file()
    bad = runner.invoke(app, ["datasets", "export", "nope", str(tmp_path / "bad")])
    assert bad.exit_code == 2 and "unknown data set 'nope'" in bad.output and not (tmp_path / "bad").exists()
