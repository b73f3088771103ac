"""The bad-input matrix: every way an outside attack run broke our inputs, and the
neighbours of each, across the commands that read workload CSVs, cluster YAML,
experiment YAML, job files and flags. Each case must end with exit status 2, exactly one
line on stderr, no traceback, in bounded time and memory: a case that hangs or fills
memory (``--cluster 99999999999x8`` once did both) fails here instead of stalling CI.

Cases run in-process through typer's ``CliRunner`` (the whole matrix takes seconds); an
alarm bounds each case's time and the process's peak resident size bounds its memory.
Where a case reproduces a specific fixed message, ``expect`` holds a part of it.
"""

from __future__ import annotations

import contextlib
import gzip
import resource
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from shapeshift.cli.main import app

#: Seconds one case may take (generous: the slowest takes well under one on a laptop).
CASE_SECONDS = 30
#: Growth of the peak resident size one case may cause.
CASE_MEMORY_BYTES = 1 << 30

HEADER = "job_id,submit_time,num_gpus,duration\n"
GOOD_ROWS = "1,0,1,100\n2,10,2,50\n"

#: Workload files: name -> content (bytes for binary content).
WORKLOADS: dict[str, str | bytes] = {
    "empty.csv": "",
    "header_only.csv": HEADER,
    "nan_submit.csv": HEADER + "1,0,1,100\n2,NaN,1,100\n",
    "inf_duration.csv": HEADER + "1,0,1,inf\n",
    "negative_gpus.csv": HEADER + "1,0,-1,100\n",
    "fractional_gpus.csv": HEADER + "1,0,1.5,100\n",
    "bool_gpus.csv": HEADER + "1,0,true,100\n",
    "missing_column.csv": "job_id,submit_time,num_gpus\n1,0,1\n",
    "duplicate_id.csv": HEADER + "1,0,1,100\n1,5,1,100\n",
    "text_duration.csv": HEADER + "1,0,1,abc\n",
    "huge_duration.csv": HEADER + "1,0,1,1e300\n",
    "negative_submit.csv": HEADER + "1,-5,1,100\n",
    "bad_timestamp.csv": HEADER + "1,2020-13-45T99:00:00,1,100\n",
    "ragged.csv": HEADER + "1,0,1,100,extra,fields\n",
    "unbalanced_quote.csv": HEADER + '1,"0,1,100\n',
    "no_known_header.csv": "a,b,c\n1,2,3\n",
    "garbage.csv": bytes(range(256)) * 4,
    "bad_utf8.csv": HEADER.encode() + b"1,0,1,\xff\xfe\n",
    "not_zstd.csv.zst": "this is not zstd data\n",
    "not_gzip.csv.gz": "this is not gzip data\n",
    "not_parquet.parquet": "this is not parquet\n",
    "nul_bytes.csv": HEADER + "1,0\x00,1,100\n",
}

#: Cluster YAML files: name -> (content, expected message part or None).
CLUSTERS: dict[str, tuple[str, str | None]] = {
    "gpus_true": ("nodes:\n  - count: 2\n    gpus: true\n", "true/false is not a number"),
    "mem_nan": ("nodes:\n  - count: 2\n    gpus: 4\n    mem_gb: .nan\n", "finite number"),
    "cpus_inf": ("nodes:\n  - count: 2\n    gpus: 4\n    cpus: .inf\n", "finite number"),
    "duplicate_key": ("nodes:\n  - count: 2\n    gpus: 4\n    gpus: 8\n", "found the key 'gpus' twice"),
    "duplicate_top": ("nodes:\n  - gpus: 4\nnodes:\n  - gpus: 8\n", "twice"),
    "count_huge": ("nodes:\n  - count: 100000000\n    gpus: 8\n", "less than or equal to 100000"),
    "gpus_total_huge": ("nodes:\n  - count: 90000\n    gpus: 16\n", "1,000,000"),
    "gpus_per_node_huge": ("nodes:\n  - gpus: 5000\n", "less than or equal to 1024"),
    "count_negative": ("nodes:\n  - count: -1\n    gpus: 8\n", None),
    "gpus_negative": ("nodes:\n  - gpus: -8\n", None),
    "unknown_key": ("nodes:\n  - gpus: 8\n    gpu: 8\n", None),
    "not_mapping": ("- gpus: 8\n", None),
    "empty": ("", None),
    "bad_yaml": ("nodes: [\n", "not valid YAML"),
    "bandwidth_no_unit": ("nodes:\n  - gpus: 8\n    inter_node_bandwidth: 100\n", "no unit"),
    "bandwidth_garbage": ("nodes:\n  - gpus: 8\n    inter_node_bandwidth: fast\n", None),
    "no_nodes": ("nodes: []\n", None),
    "partition_too_big": ("nodes:\n  - count: 2\n    gpus: 4\npartitions:\n  a: 5\n", None),
    "tenant_bool": ("nodes:\n  - gpus: 4\ntenants:\n  a: yes\n", None),
    "share_limit_bool": ("nodes:\n  - gpus: 4\ngpu_share_limit: true\n", None),
    "hex_gpus": ("nodes:\n  - gpus: 0x8\n", None),
    "alias_bomb": (
        "a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
        "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
        "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
        "g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]\nnodes: [*g]\n",
        None,
    ),
}

CLUSTER_FLAGS: dict[str, tuple[str, str | None]] = {
    "nodes_huge": ("99999999999x8", "100,000"),
    "gpus_huge": ("1x2000", "1,024"),
    "total_huge": ("5000x256", "1,000,000"),
    "zero_nodes": ("0x8", None),
    "zero_gpus": ("4x0", None),
    "digits_forever": ("9" * 40 + "x8", None),
    "letters": ("axb", None),
    "missing_file": ("no-such-cluster.yaml", None),
}

EXPERIMENT_HEAD = "name: e\nclusters: [1x2]\npolicies: [fifo]\n"
POISSON = "workloads:\n  - {name: p, generator: poisson, jobs: 10, rate: 6}\n"
EXPERIMENTS: dict[str, tuple[str, str | None]] = {
    "jobs_huge": (
        EXPERIMENT_HEAD + "workloads:\n  - {name: p, generator: poisson, jobs: 1000000000000, rate: 6}\n",
        "less than or equal to 10000000",
    ),
    "philly_jobs_huge": (
        EXPERIMENT_HEAD + "workloads:\n  - {name: p, generator: philly-poisson, jobs: 100000000, rate: 6}\n",
        "10000000",
    ),
    "sweep_jobs_huge": (EXPERIMENT_HEAD + POISSON + "sweep:\n  workload.jobs: [10, 100000000000]\n", "10000000"),
    "jobs_negative": (EXPERIMENT_HEAD + "workloads:\n  - {name: p, generator: poisson, jobs: -1}\n", None),
    "rate_nan": (EXPERIMENT_HEAD + "workloads:\n  - {name: p, generator: poisson, jobs: 10, rate: .nan}\n", None),
    "cluster_huge": ("name: e\nclusters: [99999999999x8]\npolicies: [fifo]\n" + POISSON, "100,000"),
    "unknown_policy": ("name: e\nclusters: [1x2]\npolicies: [no-such-policy]\n" + POISSON, None),
    "unknown_key": (EXPERIMENT_HEAD + POISSON + "colour: blue\n", None),
    "duplicate_key": (EXPERIMENT_HEAD + POISSON + "policies: [sjf]\n", "twice"),
    "empty": ("", None),
    "not_mapping": ("- 1\n- 2\n", None),
    "bad_yaml": (EXPERIMENT_HEAD + "workloads: [\n", None),
    "seeds_negative": (EXPERIMENT_HEAD + POISSON + "seeds: [-1]\n", None),
    "unknown_generator": (EXPERIMENT_HEAD + "workloads:\n  - {name: p, generator: nope}\n", None),
    "missing_trace": (EXPERIMENT_HEAD + "workloads:\n  - {file: /no/such/trace.csv}\n", None),
}

#: Job files for ``submit`` (refused before any controller is contacted).
JOBS: dict[str, tuple[str, str | None]] = {
    "escape_in_name": ('{"name": "a\\u001b[31mred", "command": "true", "iterations": 1}', "control character"),
    "newline_in_name": ('{"name": "two\\nlines", "command": "true", "iterations": 1}', "control character"),
    "bidi_in_name": ('{"name": "x\\u202etxt.exe", "command": "true", "iterations": 1}', "control character"),
    "duplicate_json_key": ('{"name": "a", "name": "b", "command": "true", "iterations": 1}', "twice"),
    "duplicate_yaml_key": ("name: a\nname: b\ncommand: 'true'\niterations: 1\n", "twice"),
    "gpus_true": ("name: a\ncommand: 'true'\niterations: 1\nresources: {gpus: true}\n", None),
    "iterations_negative": ("name: a\ncommand: 'true'\niterations: -1\n", None),
    "iterations_hex": ("name: a\ncommand: 'true'\niterations: 0x10\n", None),
    "no_command": ("name: a\niterations: 1\n", None),
    "unknown_field": ("name: a\ncommand: 'true'\niterations: 1\ncolour: red\n", None),
    "unknown_placeholder": ("name: a\ncommand: 'run {nope}'\niterations: 1\n", None),
    "not_mapping": ("[1, 2]\n", None),
    "bad_yaml": ("name: [\n", None),
    "empty": ("", None),
}


def _flag_cases(d: Path) -> dict[str, tuple[list[str], str | None]]:
    t = str(d / "good.csv")
    sim = ["simulate", "--workload", t, "--cluster", "1x4", "-q"]
    cmp_ = ["compare", "--workload", t, "--cluster", "1x4", "-q", "--jobs", "1"]
    state = str(d / "nostate")
    return {
        "compare_open_paren": ([*cmp_, "--policies", "fifo(backfill=true"], "without its ')'"),
        "compare_close_paren": ([*cmp_, "--policies", "fifo),sjf"], "without its '('"),
        "compare_nested_paren": ([*cmp_, "--policies", "fifo(a=(1))"], "parentheses inside"),
        "compare_unknown": ([*cmp_, "--policies", "no-such-policy"], None),
        "compare_empty": ([*cmp_, "--policies", ","], None),
        "compare_twice": ([*cmp_, "--policies", "fifo,fifo"], None),
        "compare_bad_pair": ([*cmp_, "--policies", "fifo(backfill)"], None),
        "compare_bad_seeds": ([*cmp_, "--policies", "fifo", "--seeds", "a,b"], None),
        "simulate_unknown_policy": ([*sim, "--policy", "no-such-policy"], None),
        "simulate_policy_arg_shape": ([*sim, "--policy-arg", "backfill"], None),
        "simulate_policy_arg_unknown": ([*sim, "--policy-arg", "colour=blue"], None),
        "simulate_policy_arg_bool": ([*sim, "--policy-arg", "backfill=maybe"], None),
        "simulate_window_text": ([*sim, "--window", "abc"], None),
        "simulate_window_reversed": ([*sim, "--window", "5:2"], None),
        "simulate_window_past_end": ([*sim, "--window", "50:60"], None),
        "simulate_round_nan": ([*sim, "--round", "nan"], None),
        "simulate_round_negative": ([*sim, "--round", "-1"], None),
        "simulate_seed_negative": ([*sim, "--seed", "-1"], None),
        "simulate_seed_text": ([*sim, "--seed", "abc"], None),
        "simulate_restore_penalty": ([*sim, "--restore-penalty", "soon"], None),
        "simulate_energy": ([*sim, "--energy", "solar"], None),
        "simulate_throughput": ([*sim, "--throughput", "nope"], None),
        "simulate_launch_delay_inf": ([*sim, "--launch-delay", "inf"], None),
        "simulate_format": (["simulate", "--workload", t, "--format", "nope", "-q"], None),
        "simulate_unknown_option": ([*sim, "--colour", "blue"], "No such option"),
        "generate_jobs_huge": (
            ["workload", "generate", "--jobs", "100000000000", "--out", str(d / "g.csv")],
            None,
        ),
        "generate_jobs_zero": (["workload", "generate", "--jobs", "0", "--out", str(d / "g.csv")], None),
        "generate_rate_nan": (["workload", "generate", "--rate", "nan", "--out", str(d / "g.csv")], None),
        "generate_kind": (["workload", "generate", "--kind", "wavy", "--out", str(d / "g.csv")], None),
        "describe_missing_argument": (["workload", "describe"], "Missing argument"),
        "queue_bad_state_filter": (["queue", "--state", state, "-t", "sleeping"], None),
        "queue_no_controller": (["queue", "--state", state], None),
        "serve_uid_range_text": (["serve", "--state", str(d / "s1"), "--job-uid-range", "abc"], "uid range"),
        "serve_uid_range_reversed": (["serve", "--state", str(d / "s2"), "--job-uid-range", "30000-20000"], None),
        "serve_uid_range_low": (["serve", "--state", str(d / "s3"), "--job-uid-range", "0-10"], None),
        "serve_both_users": (
            ["serve", "--state", str(d / "s4"), "--job-user", "nobody", "--job-uid-range", "20000-20001"],
            "not both",
        ),
        "serve_no_such_user": (["serve", "--state", str(d / "s5"), "--job-user", "no-such-user-here"], None),
        "serve_cluster_huge": (["serve", "--state", str(d / "s6"), "--cluster", "99999999999x8"], "100,000"),
    }


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("bad-input")
    (d / "good.csv").write_text(HEADER + GOOD_ROWS)
    for name, content in WORKLOADS.items():
        path = d / name
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    (d / "folder.csv").mkdir()
    zst = pytest.importorskip("zstandard")
    packed = zst.ZstdCompressor().compress((HEADER + GOOD_ROWS * 200).encode())
    (d / "truncated.csv.zst").write_bytes(packed[: len(packed) // 2])
    (d / "truncated.csv.gz").write_bytes(gzip.compress((HEADER + GOOD_ROWS * 200).encode())[:40])
    for name, (text, _) in CLUSTERS.items():
        (d / f"cluster_{name}.yaml").write_text(text)
    for name, (text, _) in EXPERIMENTS.items():
        (d / f"exp_{name}.yaml").write_text(text)
    for name, (text, _) in JOBS.items():
        (d / f"job_{name}.yaml").write_text(text)
    return d


WORKLOAD_FILES = [*WORKLOADS, "folder.csv", "missing.csv", "truncated.csv.zst", "truncated.csv.gz"]
WORKLOAD_EXPECT = {
    "header_only.csv": "has a header but no jobs",
    "nan_submit.csv": "nan_submit.csv:3, field 'submit_time': expected a finite number of seconds, got 'NaN'",
    "not_zstd.csv.zst": "not_zstd.csv.zst: not valid zstd data",
    "truncated.csv.zst": "truncated.csv.zst: truncated zstd data",
}


def _workload_argv(command: str, path: str, d: Path) -> list[str]:
    return {
        "simulate": ["simulate", "--workload", path, "--cluster", "1x4", "-q"],
        "describe": ["workload", "describe", path],
        "analyze": ["analyze", "trace", path, "--out", str(d / "analysis"), "-q"],
    }[command]


CASES: list[tuple[str, str, str, str | None]] = (
    [
        (f"workload-{cmd}-{name}", "workload", f"{cmd}|{name}", WORKLOAD_EXPECT.get(name))
        for name in WORKLOAD_FILES
        for cmd in ("simulate", "describe", "analyze")
    ]
    + [(f"cluster-yaml-{n}", "cluster", n, e) for n, (_, e) in CLUSTERS.items()]
    + [(f"cluster-flag-{n}", "cluster-flag", n, e) for n, (_, e) in CLUSTER_FLAGS.items()]
    + [
        (f"experiment-{cmd}-{n}", "experiment", f"{cmd}|{n}", e)
        for n, (_, e) in EXPERIMENTS.items()
        for cmd in ("validate", "run")
    ]
    + [(f"submit-{n}", "job", n, e) for n, (_, e) in JOBS.items()]
    + [(f"flag-{n}", "flag", n, None) for n in _flag_cases(Path("/x"))]
)


def _argv(kind: str, key: str, d: Path) -> tuple[list[str], str | None]:
    if kind == "workload":
        cmd, name = key.split("|")
        return _workload_argv(cmd, str(d / name), d), None
    if kind == "cluster":
        return ["simulate", "--workload", str(d / "good.csv"), "--cluster", str(d / f"cluster_{key}.yaml"), "-q"], None
    if kind == "cluster-flag":
        return ["simulate", "--workload", str(d / "good.csv"), "--cluster", CLUSTER_FLAGS[key][0], "-q"], None
    if kind == "experiment":
        cmd, name = key.split("|")
        path = str(d / f"exp_{name}.yaml")
        return (["experiment", "validate", path] if cmd == "validate" else
                ["experiment", "run", path, "--out", str(d / "exp-out"), "-q"]), None
    if kind == "job":
        return ["submit", str(d / f"job_{key}.yaml"), "--state", str(d / "nostate")], None
    return _flag_cases(d)[key]


@contextlib.contextmanager
def bounded(seconds: int) -> Iterator[None]:
    """Fail (rather than hang) when the block runs longer than ``seconds``."""

    def expire(signum: int, frame: object) -> None:
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _peak_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def test_the_matrix_has_at_least_120_cases():
    assert len(CASES) >= 120, len(CASES)


@pytest.mark.parametrize(("case", "kind", "key", "expect"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_and_exit_2(case, kind, key, expect, files, monkeypatch):
    monkeypatch.chdir(files)
    argv, flag_expect = _argv(kind, key, files)
    expect = expect or flag_expect
    before = _peak_bytes()
    with bounded(CASE_SECONDS):
        result = CliRunner().invoke(app, argv)
    grown = _peak_bytes() - before
    assert grown < CASE_MEMORY_BYTES, f"{case}: peak memory grew by {grown / 2**20:.0f} MiB"
    stderr = result.stderr
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"{case}: {type(result.exception).__name__}: {result.exception}"
    )
    assert "Traceback" not in result.output and "Traceback" not in stderr, stderr
    assert result.exit_code == 2, f"{case}: exit {result.exit_code}; stdout {result.stdout[-400:]!r}; stderr {stderr!r}"
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, f"{case}: {len(lines)} lines on stderr: {stderr!r}"
    assert lines[0].startswith("error: "), lines[0]
    if expect is not None:
        assert expect in lines[0], f"{case}: {lines[0]!r} lacks {expect!r}"
