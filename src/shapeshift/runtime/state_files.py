"""The files of a controller's state directory besides the database: the bearer token
and the address file clients read to find the controller."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

TOKEN_FILE = "token"
ADDRESS_FILE = "controller.json"
DB_FILE = "state.db"


def ensure_token(state_dir: Path) -> str:
    """The bearer token for mutating requests; generated (mode 0600) on first start."""
    path = state_dir / TOKEN_FILE
    if path.exists():
        return path.read_text().strip()
    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    os.chmod(path, 0o600)
    return token




def prepare_state_dir(state_dir: Path) -> None:
    """Create the state directory private to its owner (0700) and the database file 0600
    before SQLite opens it, so the WAL and shared-memory files SQLite creates next to it
    inherit 0600 too. Job ``env`` values (API keys), lease keys and token digests live in
    these files; nobody else on the machine may read them. An existing directory is
    tightened, not refused."""
    state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(state_dir, 0o700)
    db = state_dir / DB_FILE
    if not db.exists():
        os.close(os.open(db, os.O_WRONLY | os.O_CREAT, 0o600))
    for path in state_dir.iterdir():
        if path.is_file():
            os.chmod(path, 0o600)


def write_private(path: Path, text: str) -> None:
    """Replace ``path`` atomically with ``text``, readable by its owner only."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def default_work_dir(state_dir: Path) -> Path:
    """Where jobs' attempt and checkpoint directories go by default: beside the state
    directory, never inside it, so ``$SHAPESHIFT_CHECKPOINT_DIR/..`` leads nowhere near
    the token or the database."""
    state_dir = state_dir.absolute()
    return state_dir.with_name(state_dir.name + "-jobs")
