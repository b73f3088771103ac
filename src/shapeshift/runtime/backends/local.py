"""Local backend: every rank is a process on this machine.

Each rank runs under a tiny ``sh`` wrapper in its own session. The wrapper forwards
SIGTERM to the command and writes the command's exit status to a file when it ends, so
the status survives the controller: a restarted controller finds the wrapper again by
scanning ``/proc`` for the exit-file path in its command line, and learns how ranks that
finished in the meantime ended by reading their exit files.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

from shapeshift.runtime.backends.base import VANISHED, RankLaunch, RunId
from shapeshift.runtime.store import crash_point

#: ``$0`` is the exit file; the command is ``"$@"``. SIGTERM is forwarded to the command
#: and the wrapper keeps waiting, so the exit status is always the command's own.
WRAPPER = (
    "\"$@\" & c=$!; trap 'kill -TERM $c 2>/dev/null' TERM; "
    "while :; do wait $c; s=$?; kill -0 $c 2>/dev/null || break; done; "
    'echo $s > "$0.tmp" && mv "$0.tmp" "$0"'
)


def _read_exit(path: str) -> int | None:
    try:
        return int(Path(path).read_text().strip())
    except (OSError, ValueError):
        return None


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def find_wrapper(exit_file: str) -> int | None:
    """The pid of the wrapper writing ``exit_file``, if it still runs."""
    marker = exit_file.encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if len(argv) > 3 and argv[1] == b"-c" and argv[3] == marker:
            return int(entry.name)
    return None


class LocalBackend:
    """Processes on this machine; GPU slots become ``CUDA_VISIBLE_DEVICES`` when GPUs exist."""

    name = "local"

    def __init__(self) -> None:
        self._procs: dict[RunId, list[tuple[RankLaunch, subprocess.Popen[bytes] | None, int | None]]] = {}

    def spawn(self, run: RunId, ranks: list[RankLaunch]) -> None:
        entries: list[tuple[RankLaunch, subprocess.Popen[bytes] | None, int | None]] = []
        try:
            for rank in ranks:
                Path(rank.log).parent.mkdir(parents=True, exist_ok=True)
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(rank.exit_file)
                with open(rank.log, "ab") as log:
                    proc = subprocess.Popen(
                        ["sh", "-c", WRAPPER, rank.exit_file, *rank.argv],
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        env=rank.env,
                        start_new_session=True,
                        cwd=rank.env.get("SHAPESHIFT_WORKDIR") or None,
                    )
                entries.append((rank, proc, proc.pid))
                if len(entries) < len(ranks):
                    crash_point("between_ranks")
        finally:
            self._procs[run] = entries

    def adopt(self, run: RunId, ranks: list[RankLaunch]) -> None:
        self._procs[run] = [(rank, None, find_wrapper(rank.exit_file)) for rank in ranks]

    def poll(self, run: RunId) -> list[int | None]:
        codes: list[int | None] = []
        for rank, proc, pid in self._procs.get(run, []):
            code = _read_exit(rank.exit_file)
            if code is None:
                running = proc.poll() is None if proc is not None else pid is not None and _alive(pid)
                if not running:
                    # The wrapper is gone; it may have written its file just before exiting.
                    code = _read_exit(rank.exit_file)
                    code = VANISHED if code is None else code
            codes.append(code)
        return codes

    def _signal(self, run: RunId, sig: int) -> None:
        for _, proc, pid in self._procs.get(run, []):
            if proc is not None and proc.poll() is not None:
                continue
            if pid is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, sig)

    def terminate(self, run: RunId) -> None:
        self._signal(run, signal.SIGTERM)

    def kill(self, run: RunId) -> None:
        self._signal(run, signal.SIGKILL)

    def forget(self, run: RunId) -> None:
        for _, proc, _ in self._procs.pop(run, []):
            if proc is not None:
                proc.poll()

    def dead_nodes(self) -> set[str]:
        return set()  # every node is this machine

    def close(self) -> None:
        for run in list(self._procs):
            for _, proc, _ in self._procs[run]:
                if proc is not None:
                    proc.poll()
        self._procs.clear()
