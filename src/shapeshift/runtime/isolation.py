"""Running jobs as other users, so they cannot read the controller's secrets or each other.

A job runs arbitrary code. Under the controller's own uid it could read the state
directory (token, database with every job's ``env``) however well the paths are hidden,
so the state directory is 0700 and jobs can be run as different, unprivileged users.
The command is wrapped in util-linux ``setpriv``, which drops to the chosen uid, gid and
groups and then *execs* the command, so the wrapper's signal forwarding and exit status
are unchanged. Needs the controller to run as root (or with CAP_SETUID/CAP_SETGID).

Two ways to choose the user:

- ``--job-user NAME``: every job runs as that one account (as Slurm's daemons run jobs as
  their submitters). Jobs are then kept from the controller, not from *each other*: the
  kernel lets processes of one uid read each other's ``/proc/PID/environ`` (where the
  lease key and the job's ``env`` secrets are), signal each other and write each other's
  files.
- ``--job-uid-range LO-HI``: each job gets its own uid (and a gid of the same number)
  from a range no account on the machine uses, so the kernel's per-uid checks separate
  jobs from one another as well: another job's ``environ`` is unreadable, ``kill`` is
  refused and its 0700 checkpoint directory cannot be entered. A job keeps its uid for
  all its attempts (``LO + (id - 1) mod size``), so its checkpoint stays its own; two
  jobs whose ids map to the same uid never run at once (the second waits).
"""

from __future__ import annotations

import grp
import os
import pwd
import re
import shutil
import zlib
from dataclasses import dataclass
from pathlib import Path

from shapeshift.errors import InputError

#: The lowest uid a range may start at: below it are system accounts on common distributions.
MIN_RANGE_UID = 1000
#: ``(uid_t)-1`` and ``-2`` mean "no change" / "nobody" to the kernel and NFS.
MAX_RANGE_UID = 2**32 - 3


@dataclass(frozen=True)
class JobUser:
    """One identity a job's processes run as."""

    name: str
    uid: int
    gid: int
    #: Whether the account exists (its supplementary groups are then loaded); a uid from
    #: a range has no account and gets no supplementary groups.
    account: bool = True

    def wrap(self, argv: tuple[str, ...]) -> tuple[str, ...]:
        groups = "--init-groups" if self.account else "--clear-groups"
        return ("setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", groups, "--", *argv)

    def give(self, path: Path) -> None:
        """Make ``path`` (a job's checkpoint directory) this user's alone: owner ``uid``,
        mode 0700. Whatever an earlier attempt left inside is handed over too, without
        following symbolic links (a job could plant one pointing anywhere)."""
        if path.lstat().st_uid != self.uid:
            for root, dirs, files in os.walk(path):
                for name in dirs + files:
                    os.chown(os.path.join(root, name), self.uid, self.gid, follow_symlinks=False)
        os.chown(path, self.uid, self.gid, follow_symlinks=False)
        path.chmod(0o700)

    def for_job(self, job_id: str) -> JobUser:
        return self


@dataclass(frozen=True)
class JobUidRange:
    """A distinct uid per job, drawn from ``[low, high]``."""

    low: int
    high: int

    def uid_of(self, job_id: str) -> int:
        number = int(job_id) if job_id.isdigit() else zlib.crc32(job_id.encode())
        return self.low + (number - 1) % (self.high - self.low + 1)

    def for_job(self, job_id: str) -> JobUser:
        uid = self.uid_of(job_id)
        return JobUser(f"uid {uid}", uid, uid, account=False)


#: What ``Controller(job_user=...)`` takes: one user for all jobs, or one uid per job.
JobIdentity = JobUser | JobUidRange


def _check_can_switch(field: str) -> None:
    if os.geteuid() != 0:
        raise InputError("running jobs as another user needs the controller to run as root", field=field)
    if shutil.which("setpriv") is None:
        raise InputError("running jobs as another user needs util-linux's setpriv", field=field)


def resolve_job_user(name: str | None) -> JobUser | None:
    """Check ``--job-user`` now, at start, rather than at the first launch."""
    if not name:
        return None
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise InputError(f"no user {name!r} on this machine", field="--job-user") from None
    _check_can_switch("--job-user")
    if entry.pw_uid == 0:
        raise InputError("jobs must not run as root; name an unprivileged user", field="--job-user")
    return JobUser(name, entry.pw_uid, entry.pw_gid)


def parse_uid_range(text: str) -> tuple[int, int]:
    """``LO-HI`` as two integers within ``[MIN_RANGE_UID, MAX_RANGE_UID]``, LO <= HI."""
    match = re.fullmatch(r"\s*(\d{1,10})\s*-\s*(\d{1,10})\s*", text)
    if match is None:
        raise InputError(f"{text!r} is not a uid range LO-HI such as 20000-29999", field="--job-uid-range")
    low, high = int(match[1]), int(match[2])
    if low > high:
        raise InputError(f"{text!r}: the low end is above the high end", field="--job-uid-range")
    if low < MIN_RANGE_UID or high > MAX_RANGE_UID:
        raise InputError(
            f"{text!r}: uids must lie within {MIN_RANGE_UID}-{MAX_RANGE_UID} (below are system accounts)",
            field="--job-uid-range",
        )
    return low, high


def resolve_job_uid_range(text: str | None) -> JobUidRange | None:
    """Check ``--job-uid-range`` at start: root, setpriv, and no account on this machine
    with a uid or gid inside the range (a job must never become a real user)."""
    if not text:
        return None
    low, high = parse_uid_range(text)
    _check_can_switch("--job-uid-range")
    for entry in pwd.getpwall():
        if low <= entry.pw_uid <= high or low <= entry.pw_gid <= high:
            raise InputError(
                f"user {entry.pw_name!r} (uid {entry.pw_uid}, gid {entry.pw_gid}) lies in {low}-{high}; "
                "choose uids no account uses",
                field="--job-uid-range",
            )
    for group in grp.getgrall():
        if low <= group.gr_gid <= high:
            raise InputError(
                f"group {group.gr_name!r} (gid {group.gr_gid}) lies in {low}-{high}; choose ids no group uses",
                field="--job-uid-range",
            )
    return JobUidRange(low, high)


def root_warning(job_user: JobIdentity | None) -> str | None:
    """The one start-up line for a root controller whose jobs would run as root too."""
    if job_user is not None or os.geteuid() != 0:
        return None
    return (
        "warning: jobs run as root and can read the controller's state (token, every job's env); "
        "use --job-uid-range LO-HI (one uid per job) or --job-user NAME"
    )
