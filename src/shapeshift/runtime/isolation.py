"""Running jobs as another user, so they cannot read the controller's secrets.

A job runs arbitrary code. Under the controller's own uid it could read the state
directory (token, database with every job's ``env``) however well the paths are hidden,
so the state directory is 0700 and jobs can be run as a different, unprivileged user
(``serve --job-user nobody``, as Slurm's daemons run jobs as their submitters). The
command is wrapped in util-linux ``setpriv``, which drops to that user's uid, gid and
groups and then *execs* the command, so the wrapper's signal forwarding and exit status
are unchanged. Needs the controller to run as root (or with CAP_SETUID/CAP_SETGID).
"""

from __future__ import annotations

import os
import pwd
import shutil
from dataclasses import dataclass
from pathlib import Path

from shapeshift.errors import InputError


@dataclass(frozen=True)
class JobUser:
    name: str
    uid: int
    gid: int

    def wrap(self, argv: tuple[str, ...]) -> tuple[str, ...]:
        return ("setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--init-groups", "--", *argv)

    def give(self, path: Path) -> None:
        """Make ``path`` (a job's checkpoint directory) the job user's."""
        os.chown(path, self.uid, self.gid)


def resolve_job_user(name: str | None) -> JobUser | None:
    """Check ``--job-user`` now, at start, rather than at the first launch."""
    if not name:
        return None
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise InputError(f"no user {name!r} on this machine", field="--job-user") from None
    if os.geteuid() != 0:
        raise InputError("running jobs as another user needs the controller to run as root", field="--job-user")
    if shutil.which("setpriv") is None:
        raise InputError("running jobs as another user needs util-linux's setpriv", field="--job-user")
    if entry.pw_uid == 0:
        raise InputError("jobs must not run as root; name an unprivileged user", field="--job-user")
    return JobUser(name, entry.pw_uid, entry.pw_gid)
