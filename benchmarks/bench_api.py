"""The controller's HTTP API under load, against a real ``shapeshift serve``.

    python benchmarks/bench_api.py [--clients 64] [--submits 4] [--idle 1000] [--runs 1]
    python benchmarks/bench_api.py --idle 0 --runs 5 --compare /work/main/src

1. ``--clients`` threads each submit ``--submits`` jobs at once, a new connection per
   request (the CLI's pattern): prints connection errors/resets and the submit latency
   p50/p95/p99/max. Goal: no reset, p99 < 100 ms.
2. ``--idle`` connections are opened and left silent; ``/health`` is timed 50 times
   before and while they are held. Goal: /health p99 under 50 ms with them open.

Everything is on loopback; the controller runs on a 1x1 cluster so the jobs (``sleep``)
queue instead of loading the machine; every process is killed at the end.

``--runs N`` repeats step 1 against N fresh controllers (a first burst each, as after a
start) and prints the median p99. ``--compare SRC`` alternates those runs between this
checkout and the controller importable from ``SRC`` (another checkout's ``src``, e.g. the
code before a change), so both see the same machine load, and prints the ratio.
``--floor`` adds runs against a bare ASGI server on the same uvicorn set-up that answers
every submit ``201`` at once: the share of the latency that is the client's (64 Python
threads in one process) and the machine's, not the controller's.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

JOB = {"name": "load", "command": "sleep 600", "iterations": 1}
FLOOR = "floor"  # the variant that runs the bare server


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def start_controller(state: Path, src: str | None = None) -> tuple[subprocess.Popen[bytes], str, str]:
    """``shapeshift serve`` on a 1x1 cluster; ``src`` puts another checkout's code first."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join([src, *filter(None, [env.get("PYTHONPATH")])])
    proc = subprocess.Popen(
        [sys.executable, "-m", "shapeshift.cli.main", "serve", "--state", str(state), "--cluster", "1x1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env=env,
    )
    address = state / "controller.json"
    deadline = time.monotonic() + 60
    while not address.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("the controller did not start")
        time.sleep(0.1)
    url = json.loads(address.read_text())["url"]
    return proc, url, (state / "token").read_text().strip()


NULL_SERVER = """
import sys
from shapeshift.runtime.http_server import UvicornServer

async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    body = b'{"id":"1","created":true}'
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 201, "headers": headers})
    await send({"type": "http.response.body", "body": body})

server = UvicornServer(app, "127.0.0.1", 0)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


def start_null_server() -> tuple[subprocess.Popen[bytes], str, str]:
    """The floor: an ASGI app that reads the body and answers 201 (no validation, no store)."""
    proc = subprocess.Popen([sys.executable, "-c", NULL_SERVER], stdout=subprocess.PIPE, start_new_session=True)
    assert proc.stdout is not None
    port = int(proc.stdout.readline())
    return proc, f"http://127.0.0.1:{port}", "none"


def request(host: str, port: int, method: str, path: str, token: str, body: bytes | None = None) -> int:
    conn = http.client.HTTPConnection(host, port, timeout=30)
    try:
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (from /proc), to separate the server's own
    cost per request from the time it waited for a core on a loaded machine."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def submit_storm(host: str, port: int, token: str, clients: int, submits: int, server_pid: int) -> tuple[float, float]:
    """Prints the figures of one burst; returns its p99 latency and the server's CPU per
    submit, both in ms."""
    latencies: list[float] = []
    errors: list[str] = []
    statuses: dict[int, int] = {}
    lock = threading.Lock()
    barrier = threading.Barrier(clients)

    def client(i: int) -> None:
        barrier.wait()
        for k in range(submits):
            body = json.dumps({**JOB, "submission_id": f"bench-{os.getpid()}-{i}-{k}"}).encode()
            started = time.perf_counter()
            try:
                status = request(host, port, "POST", "/jobs", token, body)
            except OSError as exc:  # ConnectionResetError, refused, timeout
                with lock:
                    errors.append(type(exc).__name__)
                continue
            elapsed = time.perf_counter() - started
            with lock:
                latencies.append(elapsed)
                statuses[status] = statuses.get(status, 0) + 1

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    cpu = cpu_seconds(server_pid)
    wall = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - wall
    time.sleep(0.5)  # let the control loop take in the submissions it was sent
    cpu = cpu_seconds(server_pid) - cpu
    ms = [1000 * v for v in latencies]
    print(f"submits: {clients} clients x {submits} = {clients * submits} in {wall:.2f} s")
    print(f"  statuses {statuses}, connection errors/resets {len(errors)} {sorted(set(errors))}")
    if ms:
        print(
            f"  latency ms: p50 {percentile(ms, 0.5):.1f}  p95 {percentile(ms, 0.95):.1f}  "
            f"p99 {percentile(ms, 0.99):.1f}  max {max(ms):.1f}   (goal: no reset, p99 < 100)"
        )
    n = clients * submits
    print(
        f"  controller CPU: {cpu:.2f} s for {n} submits = {1000 * cpu / n:.2f} ms each "
        f"(the whole burst needs {cpu * 1000:.0f} ms of one free core; load average {os.getloadavg()[0]:.1f})"
    )
    return (percentile(ms, 0.99) if ms else float("nan")), 1000 * cpu / n


def health_times(host: str, port: int, token: str, n: int = 50) -> list[float]:
    times = []
    for _ in range(n):
        started = time.perf_counter()
        request(host, port, "GET", "/health", token)
        times.append(1000 * (time.perf_counter() - started))
    return times


def idle_connections(host: str, port: int, token: str, count: int) -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, count + 1024), hard))
    before = health_times(host, port, token)
    idle = []
    try:
        for _ in range(count):
            idle.append(socket.create_connection((host, port), timeout=10))
        time.sleep(0.5)
        during = health_times(host, port, token)
    finally:
        for s in idle:
            s.close()
    print(f"/health with {len(idle)} idle connections open (50 requests each):")
    for label, ms in (("before", before), ("during", during)):
        print(
            f"  {label}: p50 {statistics.median(ms):.1f} ms  p99 {percentile(ms, 0.99):.1f} ms  "
            f"max {max(ms):.1f} ms   (goal during: < 50)"
        )


def kill_all(proc: subprocess.Popen[bytes], tmp: str) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    for entry in Path("/proc").iterdir():  # the jobs it started (sleep 600)
        with contextlib.suppress(OSError, ValueError):
            if entry.name.isdigit() and tmp.encode() in (entry / "cmdline").read_bytes():
                os.killpg(int(entry.name), signal.SIGKILL)


def one_run(args: argparse.Namespace, src: str | None, idle: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory(prefix="bench-api-") as tmp:
        if src == FLOOR:
            proc, url, token = start_null_server()
        else:
            proc, url, token = start_controller(Path(tmp) / "state", src)
        host, port = url.removeprefix("http://").rsplit(":", 1)
        try:
            figures = submit_storm(host, int(port), token, args.clients, args.submits, proc.pid)
            if idle:
                idle_connections(host, int(port), token, idle)
        finally:
            kill_all(proc, tmp)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--submits", type=int, default=4)
    parser.add_argument("--idle", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=1, help="fresh controllers, one burst each")
    parser.add_argument("--compare", metavar="SRC", help="alternate runs with the controller importable from SRC")
    parser.add_argument("--floor", action="store_true", help="alternate runs with a server that answers at once")
    args = parser.parse_args()
    variants: list[tuple[str, str | None]] = [("this checkout", None)]
    if args.compare:
        variants.append((f"--compare {args.compare}", args.compare))
    if args.floor:
        variants.append(("--floor (answers at once)", FLOOR))
    p99s: dict[str, list[float]] = {label: [] for label, _ in variants}
    cpus: dict[str, list[float]] = {label: [] for label, _ in variants}
    for run in range(args.runs):
        for label, src in variants:
            print(f"[run {run + 1}/{args.runs}: {label}]")
            p99, cpu = one_run(args, src, args.idle if run == 0 and src is None else 0)
            p99s[label].append(p99)
            cpus[label].append(cpu)
    if args.runs > 1 or len(variants) > 1:
        medians = {label: statistics.median(v) for label, v in p99s.items()}
        for label, values in p99s.items():
            listed = ", ".join(f"{v:.1f}" for v in values)
            print(
                f"submit p99 ms, {label}: median {medians[label]:.1f} over {len(values)} runs ({listed}); "
                f"server CPU per submit median {statistics.median(cpus[label]):.2f} ms"
            )
        if args.compare:
            new, old = medians[variants[0][0]], medians[variants[1][0]]
            print(f"p99 ratio compared/this checkout: {old / new:.2f}")


if __name__ == "__main__":
    main()
