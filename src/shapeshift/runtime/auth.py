"""Who is asking: per-user bearer tokens and what each identity may see and do.

Two kinds of token, like Slurm's operators and users:

* the **admin token** (``DIR/token``, written on the controller's first start) may do
  anything: submit for any user, cancel any job, read every job in full;
* **user tokens** (``shapeshift token create --user U --tenant T``) belong to one user
  of one tenant. A user submits as themself (the job's ``user`` and ``tenant`` are taken
  from the token, whatever the job file says), cancels only their own jobs, and sees
  other users' jobs without their command, environment or logs (Slurm's
  ``PrivateData=jobs`` spirit: the queue is visible, the contents are not).

Only a SHA-256 digest of a user token is stored (in the state database), so a leaked
copy of ``state.db`` does not hand out working tokens. Every read needs a token too.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any

from shapeshift.errors import InputError
from shapeshift.runtime.store import Store

TOKENS_SCHEMA = """
CREATE TABLE IF NOT EXISTS tokens (
    digest TEXT PRIMARY KEY,
    user TEXT NOT NULL,
    tenant TEXT NOT NULL DEFAULT '',
    created REAL NOT NULL,
    revoked INTEGER NOT NULL DEFAULT 0
);
"""

#: User and tenant names: what a shell, a log line and a metric label all take safely.
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")
ADMIN = "admin"


@dataclass(frozen=True)
class Identity:
    user: str
    tenant: str
    admin: bool

    def owns(self, job: dict[str, Any]) -> bool:
        return self.admin or job.get("user") == self.user

    def may_cancel(self, job: dict[str, Any]) -> bool:
        return self.owns(job)


ADMIN_IDENTITY = Identity(ADMIN, "", True)


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def check_name(value: str, flag: str) -> str:
    if not NAME.match(value) or value == ADMIN:
        raise InputError(
            f"{value!r} is not a usable name: letters, digits, '.', '_', '@', '-' (at most 64), not 'admin'",
            field=flag,
        )
    return value


def ensure_schema(store: Store) -> None:
    with store.transaction() as db:
        db.execute(TOKENS_SCHEMA.strip().rstrip(";"))


def create_token(store: Store, user: str, tenant: str = "") -> str:
    """A new token for ``user`` of ``tenant``; only its digest is stored. Printed once."""
    check_name(user, "--user")
    if tenant:
        check_name(tenant, "--tenant")
    ensure_schema(store)
    token = "u_" + secrets.token_urlsafe(32)
    with store.transaction() as db:
        db.execute(
            "INSERT INTO tokens (digest, user, tenant, created) VALUES (?, ?, ?, ?)",
            (digest(token), user, tenant, time.time()),
        )
    return token


def revoke_tokens(store: Store, user: str) -> int:
    """Revoke every token of ``user``; returns how many were live."""
    ensure_schema(store)
    with store.transaction() as db:
        cur = db.execute("UPDATE tokens SET revoked = 1 WHERE user = ? AND revoked = 0", (user,))
        return int(cur.rowcount)


def list_tokens(store: Store) -> list[dict[str, Any]]:
    ensure_schema(store)
    with store.transaction() as db:
        rows = db.execute("SELECT user, tenant, created, revoked FROM tokens ORDER BY created").fetchall()
    return [dict(r) for r in rows]


class Authenticator:
    """Turns an ``Authorization`` header into an ``Identity`` (or None).

    User tokens are cached in memory and re-read from the store at most every
    ``refresh`` seconds, so a request costs no database round trip and a token created or
    revoked by ``shapeshift token`` while the controller runs takes effect within that time.
    """

    def __init__(self, store: Store, admin_token: str, refresh: float = 1.0):
        self.store = store
        self.admin_token = admin_token
        self.refresh = refresh
        self._lock = threading.Lock()
        self._tokens: dict[str, Identity] = {}
        self._loaded = float("-inf")
        ensure_schema(store)

    def _reload(self) -> None:
        # Through the store's read-only connections: never waits for the writer's lock.
        rows = self.store._read("SELECT digest, user, tenant FROM tokens WHERE revoked = 0")
        self._tokens = {r["digest"]: Identity(r["user"], r["tenant"], False) for r in rows}
        self._loaded = time.monotonic()

    @staticmethod
    def _token(header: str | bytes | None) -> str | None:
        if not header:
            return None
        if isinstance(header, bytes):
            try:
                header = header.decode("ascii")
            except UnicodeDecodeError:  # a token is ASCII; anything else is simply wrong
                return None
        scheme, _, token = header.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token or not token.isascii():
            return None
        return token

    def needs_reload(self) -> bool:
        return time.monotonic() - self._loaded > self.refresh

    def _admin_or_token(self, header: str | bytes | None) -> Identity | str | None:
        """The admin identity, else the presented token (to look up), else None."""
        token = self._token(header)
        if token is None:
            return None
        if hmac.compare_digest(token.encode(), self.admin_token.encode()):
            return ADMIN_IDENTITY
        return token

    def identify_cached(self, header: str | bytes | None) -> Identity | None:
        """From memory only (never touches the database): the admin or a cached user."""
        found = self._admin_or_token(header)
        if not isinstance(found, str):
            return found
        return None if self.needs_reload() else self._tokens.get(digest(found))

    def identify(self, header: str | bytes | None) -> Identity | None:
        """Re-reads the token table when it is older than ``refresh`` (blocking)."""
        found = self._admin_or_token(header)
        if not isinstance(found, str):
            return found
        with self._lock:
            if self.needs_reload():
                self._reload()
            return self._tokens.get(digest(found))
