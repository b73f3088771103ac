"""The fair-share tree: ``sacctmgr show assoc -P`` output, or one built from a history.

``sacctmgr -P`` prints ``|``-separated fields with a header; the replay needs
``Account``, ``User`` (blank on an account's own row) and ``Share`` (``Fairshare`` in
older releases; ``parent`` means "use the parent's"), and ``ParentName`` when the dump
has it (``sacctmgr show assoc format=account,user,share,parentname``); without it every
account hangs under ``root``. ``GrpTRES`` (its ``gres/gpu``), ``GrpJobs``, ``MaxJobs``,
``GrpSubmit`` and ``MaxSubmit`` are read where the dump has them. Users a history names
but the dump lacks get Slurm's default share, 1, as ``sacctmgr add user`` gives them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from shapeshift.errors import InputError
from shapeshift.slurm.parsable import read_parsable, require_fields
from shapeshift.slurm.qos import tres_gpus

#: ``Share`` of an association that uses its parent's (``SLURMDB_FS_USE_PARENT``).
USE_PARENT = -1


@dataclass(frozen=True)
class Assoc:
    """One association: an account (``user`` empty) or a user in an account."""

    account: str
    user: str
    parent: str  # the parent account ("" for root)
    shares: int
    # Limits (``None``: none): GPUs and running jobs of the association and everything
    # under it (``GrpTRES`` gres/gpu, ``GrpJobs``), running jobs of this association
    # alone (``MaxJobs``); ``policies/slurm/qos_limits.py`` applies them.
    grp_gpus: int | None = None
    grp_jobs: int | None = None
    max_jobs: int | None = None
    #: Jobs submitted and not ended of the association and everything under it
    #: (``GrpSubmit``), of this association alone (``MaxSubmit``).
    grp_submit: int | None = None
    max_submit: int | None = None

    @property
    def key(self) -> str:
        return assoc_key(self.account, self.user)


def assoc_key(account: str, user: str) -> str:
    return f"{account}/{user}" if user else account


def read_assoc(path: str | Path) -> tuple[Assoc, ...]:
    header, rows = read_parsable(path, "association file")
    share_col = "share" if "share" in header else "fairshare"
    hint = "export with sacctmgr show assoc -P format=account,user,share,parentname"
    require_fields(header, ("account", "user", share_col), path, hint)
    result = []
    for number, row in rows:
        account = row["account"]
        if not account:
            raise InputError("Account is empty", path=str(path), line=number, field="Account")
        share_text = row[share_col].lower()
        if share_text == "":
            shares = 1  # sacctmgr leaves the root row's share blank; Slurm's default is 1
        elif share_text == "parent":
            shares = USE_PARENT
        elif share_text.isdigit():
            shares = int(share_text)
        else:
            raise InputError(
                f"bad share {row[share_col]!r}; expected a whole number or 'parent'",
                path=str(path),
                line=number,
                field=share_col,
            )
        user = row["user"]
        parent = account if user else row.get("parentname", "") or ("" if account == "root" else "root")
        limits: list[int | None] = []
        for column in ("grptres", "grpjobs", "maxjobs", "grpsubmit", "maxsubmit"):
            value = row.get(column, "") or row.get(column + "jobs", "")
            try:
                if column != "grptres" and value and not value.isdigit():
                    raise ValueError("expected a whole number")
                limits.append(tres_gpus(value) if column == "grptres" else (int(value) if value else None))
            except ValueError as exc:
                raise InputError(f"bad {column} {value!r}: {exc}", path=str(path), line=number, field=column) from None
        result.append(Assoc(account, user, parent, shares, *limits))
    return tuple(result)


def complete_tree(assocs: Iterable[Assoc], pairs: Iterable[tuple[str, str]]) -> dict[str, Assoc]:
    """The associations by key, with ``root``, and an account and user association (share
    1) for every ``(account, user)`` in ``pairs`` the dump lacks."""
    tree = {a.key: a for a in assocs}
    tree.setdefault("root", Assoc("root", "", "", 1))
    for account, user in pairs:
        if account not in tree:
            tree[account] = Assoc(account, "", "root", 1)
        key = assoc_key(account, user)
        if user and key not in tree:
            tree[key] = Assoc(account, user, account, 1)
    return tree
