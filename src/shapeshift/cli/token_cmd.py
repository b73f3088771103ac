"""``shapeshift token create|list|revoke``: per-user API tokens, managed by the operator.

These commands open the controller's database directly (whoever can read ``DIR`` is the
operator), so they work whether or not the controller runs; a running controller sees a
new or revoked token within a second.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from shapeshift.cli.common import console, guarded
from shapeshift.cli.options import JsonOption
from shapeshift.errors import InputError

if TYPE_CHECKING:
    from shapeshift.runtime.store import Store

app = typer.Typer(help="Create, list and revoke per-user API tokens (operator only).", no_args_is_help=True)
StateOption = Annotated[str | None, typer.Option(help="Controller state directory.")]


@contextmanager
def operator_store(state: str | None) -> Iterator[Store]:
    from shapeshift.runtime.preflight import check_database
    from shapeshift.runtime.remote import state_dir
    from shapeshift.runtime.state_files import DB_FILE
    from shapeshift.runtime.store import StateUnavailable, Store

    directory = Path(state_dir(state))
    if not (directory / DB_FILE).is_file():
        raise InputError(f"no controller state in {directory}; start 'shapeshift serve --state {directory}' once")
    check_database(directory)
    try:
        store = Store(directory / DB_FILE)
    except (sqlite3.Error, StateUnavailable) as exc:
        raise InputError(f"{directory / DB_FILE} cannot be opened: {exc}") from None
    try:
        yield store
    except (sqlite3.Error, StateUnavailable) as exc:
        raise InputError(f"{directory / DB_FILE}: {exc}") from None
    finally:
        store.close()


@app.command("create")
@guarded
def create(
    user: Annotated[str, typer.Option(help="The user the token acts for.")],
    tenant: Annotated[str, typer.Option(help="The user's tenant (their jobs count against its quota).")] = "",
    state: StateOption = None,
) -> None:
    """Print a new token for USER of TENANT (shown once; only its digest is stored)."""
    from shapeshift.runtime.auth import create_token

    with operator_store(state) as store:
        token = create_token(store, user, tenant)
    typer.echo(token)


@app.command("list")
@guarded
def list_command(state: StateOption = None, as_json: JsonOption = False) -> None:
    """Every token's user, tenant, creation time and whether it was revoked (never the token)."""
    from shapeshift.runtime.auth import list_tokens

    with operator_store(state) as store:
        rows = list_tokens(store)
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    table = Table()
    for column in ("user", "tenant", "created", "revoked"):
        table.add_column(column)
    for r in rows:
        created = datetime.fromtimestamp(r["created"], UTC).strftime("%Y-%m-%d %H:%M UTC")
        table.add_row(r["user"], r["tenant"], created, "yes" if r["revoked"] else "")
    console.print(table)


@app.command("revoke")
@guarded
def revoke(
    user: Annotated[str, typer.Option(help="Revoke every token of this user.")], state: StateOption = None
) -> None:
    """Revoke all of USER's tokens (their jobs keep running)."""
    from shapeshift.runtime.auth import revoke_tokens

    with operator_store(state) as store:
        count = revoke_tokens(store, user)
    if count == 0:
        raise InputError(f"{user} has no live token", field="--user")
    console.print(f"revoked {count} token(s) of {user}", highlight=False)
