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


