"""One controller per state directory: an exclusive ``flock`` on ``DIR/lock``.

Two controllers on one directory would both adopt the running jobs and the second would
rewrite ``controller.json`` under the first one's clients. The lock is held for the
controller's lifetime and released by the kernel when its process dies, so a crashed
controller never leaves a stale lock behind (unlike a PID file alone). The file also
holds the holder's PID, so the refusal can name it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from shapeshift.errors import InputError

LOCK_FILE = "lock"


class StateDirLock:
    """Held while a controller serves ``state_dir``; ``release`` (or process exit) frees it."""

    def __init__(self, state_dir: Path):
        self.path = state_dir / LOCK_FILE
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise InputError(
                f"state directory {state_dir} is in use by another controller (PID {holder}); "
                "stop it or pass another --state"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd: int | None = fd

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
