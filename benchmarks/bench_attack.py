"""Attack probes against a real ``shapeshift serve``, on loopback, with a pass/fail table.

    python benchmarks/bench_attack.py [--stalled 4200] [--src OTHER/src] [--serve-arg=--job-user=nobody]

Each probe is bounded in requests and in time (about a minute and a half in all, most of
it spent waiting out the server's 10 s head and body deadlines); everything listens and
connects on 127.0.0.0/8 only, and every process started is killed at the end. ``--src``
runs the controller from another checkout's ``src`` (e.g. the code before a change);
``--serve-arg`` passes a flag to ``serve`` (repeatable).

Probes, and what passes:

* **stalled-body**: ``--stalled`` unauthenticated ``POST /jobs/1/metrics`` with
  ``Content-Length: 5000`` and no body, held open from 127.0.0.2, then 200 authenticated
  submits stalled the same way from 127.0.0.3. Passes when, while they are held,
  ``/health`` answers 200 and a submit from 127.0.0.1 answers 201; every unauthenticated
  one is answered or closed within 5 s; every authenticated one within 15 s (the body
  deadline is 10 s); and after they are released the controller's log holds no traceback
  and grew by less than 64 KB.
* **slow-head (first)** and **slow-head (keep-alive)**: a request head sent one byte every
  0.5 s, on a fresh connection and as the second request of a keep-alive connection.
  Passes when the server closes the connection within 15 s (the head deadline is 10 s).
* **nested-json**: an 800 KB nested JSON array as a submit and as a metrics report.
  Passes when both answer 4xx.
* **odd-id** (one row per id): ``GET /jobs/%C2%B2``, ``/jobs/99999999999999999999999999``,
  ``/jobs/%D9%A5`` with jobs 1-5 stored. Passes on 404 ('٥' must not resolve to job 5).
* **cross-tenant**: users alice and bob (their own tokens, tenants a and b) each submit
  one job through the API; both run at once, and each job looks for the other: by the
  other's command line in ``/proc`` (it names its checkpoint directory, hence its job
  id) and by guessing its neighbours' checkpoint directories. For each peer process it
  finds, it tries to read ``/proc/PID/environ`` (looking for the peer's
  ``SHAPESHIFT_LEASE_KEY``), to signal it (signal 0: a permission check that sends
  nothing) and to create a file in the peer's checkpoint directory. Each job prints one
  ``PROBE {...}`` line, read back through ``GET /jobs/ID/logs`` with its owner's token.
  Passes when neither job read the peer's lease key, was allowed to signal it, or wrote
  into its checkpoint; ERROR when a job printed no ``PROBE`` line. Without ``--job-user``
  every job runs as the controller's user, so this row fails by design.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ATTACKER, SECOND = "127.0.0.2", "127.0.0.3"

PROBE = r"""
import json, os, sys, time
mine = sys.argv[1]  # this job's checkpoint directory: WORK/<job id>/checkpoint
my_id = os.environ.get("SHAPESHIFT_JOB_ID", "")
result = {"job": my_id, "peers": 0, "lease_key_read": False, "signal_allowed": False, "checkpoint_written": False}
work = os.path.dirname(os.path.dirname(mine))
deadline = time.time() + float(sys.argv[2])
while time.time() < deadline:
    dirs = set()
    for guess in range(max(int(my_id) - 3, 1), int(my_id) + 4):
        if str(guess) != my_id:
            dirs.add(os.path.join(work, str(guess), "checkpoint"))
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                words = f.read().decode(errors="replace").split("\0")
        except OSError:
            continue
        if "attack-probe" in words and mine not in words:
            pids.append(int(entry))
            dirs.update(w for w in words if w.endswith("/checkpoint") and w != mine)
    result["peers"] = len(pids)
    for pid in pids:
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read()
            if b"SHAPESHIFT_LEASE_KEY=" in env and f"SHAPESHIFT_JOB_ID={my_id}\0".encode() not in env:
                result["lease_key_read"] = True
        except OSError:
            pass
        try:
            os.kill(pid, 0)
            result["signal_allowed"] = True
        except OSError:
            pass
    for d in dirs:
        try:
            with open(os.path.join(d, f"written-by-{my_id}"), "w") as f:
                f.write("x")
            result["checkpoint_written"] = True
        except OSError:
            pass
    if pids:
        break
    time.sleep(0.2)
time.sleep(2)  # stay alive while the peer looks for us
print("PROBE " + json.dumps(result), flush=True)
"""


def raise_file_limit() -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def http(
    url: str,
    method: str,
    path: str,
    token: str | None = None,
    body: bytes | None = None,
    timeout: float = 5.0,
    headers: dict[str, str] | None = None,
) -> tuple[int, bytes]:
    h = dict(headers or {})
    if token:
        h["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url + path, data=body, headers=h, method=method)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except (OSError, urllib.error.URLError) as exc:
        return 0, str(exc).encode()


class Controller:
    def __init__(self, root: Path, src: str | None, extra: list[str]):
        self.state = root / "state"
        self.log_path = root / "serve.log"
        env = dict(os.environ)
        if src is not None:
            env["PYTHONPATH"] = os.pathsep.join([src, *filter(None, [env.get("PYTHONPATH")])])
        self.env = env
        self.log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        argv = [
            sys.executable,
            "-m",
            "shapeshift.cli.main",
            "serve",
            "--state",
            str(self.state),
            "--cluster",
            "1x4",
            "--host",
            "127.0.0.1",
            *extra,
        ]
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True, env=env)
        address = self.state / "controller.json"
        deadline = time.monotonic() + 60
        while not address.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the controller did not start:\n{self.log_path.read_text()[-2000:]}")
            time.sleep(0.1)
        info = json.loads(address.read_text())
        self.url = info["url"]
        self.port = int(self.url.rsplit(":", 1)[1])
        self.work_dir = Path(info.get("work_dir", str(self.state) + "-jobs"))
        self.token = (self.state / "token").read_text().strip()

    def user_token(self, user: str, tenant: str) -> str:
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "shapeshift.cli.main",
                "token",
                "create",
                "--user",
                user,
                "--tenant",
                tenant,
                "--state",
                str(self.state),
            ],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=60,
            check=True,
        )
        return out.stdout.strip().splitlines()[-1]

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        self.log.close()
        marker = str(self.work_dir).encode()
        for entry in Path("/proc").iterdir():  # the jobs it started (their command lines name work_dir)
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    if marker in (entry / "cmdline").read_bytes():
                        os.kill(int(entry.name), signal.SIGKILL)


def connect(port: int, source: str, timeout: float = 2.0) -> socket.socket:
    s = socket.socket()
    s.settimeout(timeout)
    try:
        s.bind((source, 0))
    except OSError:  # no such loopback address here: share 127.0.0.1
        s.bind(("127.0.0.1", 0))
    s.connect(("127.0.0.1", port))
    return s


def answered_within(sockets: list[socket.socket], seconds: float) -> int:
    """How many of ``sockets`` got an answer or were closed within ``seconds``."""
    selector = selectors.DefaultSelector()
    for s in sockets:
        s.setblocking(False)
        selector.register(s, selectors.EVENT_READ)
    done = 0
    deadline = time.monotonic() + seconds
    while done < len(sockets) and time.monotonic() < deadline:
        for key, _ in selector.select(timeout=max(0.0, min(0.5, deadline - time.monotonic()))):
            selector.unregister(key.fileobj)
            done += 1
    selector.close()
    return done


def stalled(port: int, source: str, count: int, request: bytes) -> list[socket.socket]:
    held = []
    for _ in range(count):
        try:
            s = connect(port, source)
            s.sendall(request)
            held.append(s)
        except OSError:  # refused or reset at once: the server defended itself
            continue
    return held


def probe_stalled_body(c: Controller, count: int) -> list[tuple[str, bool, str]]:
    log_before = c.log_path.stat().st_size
    unauth = b"POST /jobs/1/metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n"
    held = stalled(c.port, ATTACKER, count, unauth)
    status_health = http(c.url, "GET", "/health", timeout=5)[0]
    job = json.dumps({"name": "during-attack", "command": "true", "iterations": 1}).encode()
    status_submit = http(c.url, "POST", "/jobs", c.token, job, timeout=5)[0]
    unauth_done = answered_within(held, 5.0) + (count - len(held))
    auth = f"POST /jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {c.token}\r\nContent-Length: 5000\r\n\r\n"
    held_auth = stalled(c.port, SECOND, 200, auth.encode())
    auth_done = answered_within(held_auth, 15.0) + (200 - len(held_auth))
    for s in held + held_auth:
        s.close()
    time.sleep(2.0)
    log = c.log_path.read_bytes()[log_before:]
    tracebacks = log.count(b"Traceback")
    rows = [
        (
            "stalled-body: /health and a submit while held",
            status_health == 200 and status_submit == 201,
            f"/health {status_health}, submit {status_submit} with {count} stalled requests held",
        ),
        ("stalled-body: unauthenticated answered in 5 s", unauth_done == count, f"{unauth_done}/{count}"),
        ("stalled-body: authenticated answered in 15 s", auth_done == 200, f"{auth_done}/200"),
        (
            "stalled-body: log after release",
            tracebacks == 0 and len(log) < 64 * 1024,
            f"{tracebacks} tracebacks, {len(log)} bytes",
        ),
    ]
    return rows


def probe_slow_head(c: Controller, keep_alive: bool) -> tuple[str, bool, str]:
    name = "slow-head (keep-alive)" if keep_alive else "slow-head (first)"
    s = connect(c.port, "127.0.0.1", timeout=0.5)
    try:
        if keep_alive:
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            first = b""
            with contextlib.suppress(TimeoutError):
                while b"}" not in first:
                    first += s.recv(65536)
        started = time.monotonic()
        head = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 200
        for byte in head:
            try:
                s.sendall(bytes([byte]))
                if s.recv(1) == b"":
                    return name, True, f"closed after {time.monotonic() - started:.1f} s"
            except TimeoutError:
                pass
            except (BrokenPipeError, ConnectionResetError):
                return name, True, f"closed after {time.monotonic() - started:.1f} s"
            if time.monotonic() - started > 15:
                return name, False, "still open after 15 s"
        return name, False, "whole head trickled without a close"
    finally:
        s.close()


def probe_nested(c: Controller) -> tuple[str, bool, str]:
    body = b"[" * 400_000 + b"]" * 400_000
    submit = http(c.url, "POST", "/jobs", c.token, body, timeout=15)[0]
    report = http(c.url, "POST", "/jobs/1/metrics", None, body, timeout=15, headers={"Authorization": "Lease nope"})[0]
    ok = 400 <= submit < 500 and 400 <= report < 500
    return "nested-json (800 KB)", ok, f"submit {submit}, metrics {report}"


def probe_odd_ids(c: Controller) -> list[tuple[str, bool, str]]:
    job = json.dumps({"name": "filler", "command": "true", "iterations": 1}).encode()
    while len(json.loads(http(c.url, "GET", "/jobs", c.token)[1] or b"[]")) < 5:
        http(c.url, "POST", "/jobs", c.token, job)
    rows = []
    for raw in ("%C2%B2", "99999999999999999999999999", "%D9%A5"):
        status, body = http(c.url, "GET", f"/jobs/{raw}", c.token)
        one_line = b"\n" not in body.strip()
        rows.append((f"odd-id /jobs/{raw}", status == 404 and one_line, f"{status} {body[:60]!r}"))
    return rows


def probe_cross_tenant(c: Controller, root: Path, seconds: float = 30.0) -> tuple[str, bool | None, str]:
    script = root / "probe" / "attack-probe.py"
    script.parent.mkdir()
    script.write_text(PROBE)
    for path in (root, script.parent):
        path.chmod(0o755)  # a job running as another user must read the script
    script.chmod(0o644)
    tokens = {user: c.user_token(user, tenant) for user, tenant in (("alice", "a"), ("bob", "b"))}
    jobs = {}
    for user, token in tokens.items():
        command = f"{{python}} {script} {{checkpoint_dir}} 20 attack-probe"
        body = json.dumps({"name": f"probe-{user}", "command": command, "iterations": 1, "resources": {"gpus": 1}})
        status, answer = http(c.url, "POST", "/jobs", token, body.encode())
        if status != 201:
            return "cross-tenant", None, f"submit as {user}: {status} {answer[:80]!r}"
        jobs[user] = json.loads(answer)["id"]
    deadline = time.monotonic() + seconds
    results: dict[str, dict] = {}
    while time.monotonic() < deadline and len(results) < 2:
        for user, job_id in jobs.items():
            status, text = http(c.url, "GET", f"/jobs/{job_id}/logs", tokens[user])
            for line in text.decode(errors="replace").splitlines():
                if line.startswith("PROBE "):
                    results[user] = json.loads(line[6:])
        time.sleep(0.5)
    if len(results) < 2:
        return "cross-tenant", None, f"no PROBE line from {sorted(set(jobs) - set(results))} within {seconds:g} s"
    breaches = [
        f"{user}: {k}"
        for user, r in results.items()
        for k in ("lease_key_read", "signal_allowed", "checkpoint_written")
        if r[k]
    ]
    found = {user: r["peers"] for user, r in results.items()}
    return "cross-tenant", not breaches, ("; ".join(breaches) or "no breach") + f" (peer processes seen: {found})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stalled", type=int, default=4200, help="unauthenticated stalled requests (default 4200)")
    parser.add_argument("--src", default=None, help="run the controller from this checkout's src")
    parser.add_argument("--serve-arg", action="append", default=[], help="extra flag for serve (repeatable)")
    args = parser.parse_args()
    if not 1 <= args.stalled <= 10_000:
        parser.error("--stalled must be 1-10000")
    raise_file_limit()
    root = Path(tempfile.mkdtemp(prefix="shapeshift-attack-"))
    started = time.monotonic()
    rows: list[tuple[str, bool | None, str]] = []
    c = Controller(root, args.src, args.serve_arg)
    try:
        rows += probe_stalled_body(c, args.stalled)
        rows.append(probe_slow_head(c, keep_alive=False))
        rows.append(probe_slow_head(c, keep_alive=True))
        rows.append(probe_nested(c))
        rows += probe_odd_ids(c)
        rows.append(probe_cross_tenant(c, root))
    finally:
        c.stop()
        shutil.rmtree(root, ignore_errors=True)
    width = max(len(name) for name, _, _ in rows)
    print(f"{'probe':<{width}}  result  detail")
    for name, ok, detail in rows:
        verdict = "ERROR" if ok is None else ("PASS" if ok else "FAIL")
        print(f"{name:<{width}}  {verdict:<6}  {detail}")
    print(f"({time.monotonic() - started:.0f} s, controller from {args.src or 'this checkout'})")
    return 0 if all(ok for _, ok, _ in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
