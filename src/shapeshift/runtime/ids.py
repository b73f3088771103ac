"""What the controller accepts as an id: job ids as the store hands them out, and the
owner a client-chosen submission id belongs to."""

from __future__ import annotations

#: Who owns the submission ids the admin token uses (no user may be called this).
ADMIN_OWNER = "admin"


class SubmissionConflict(Exception):
    """A submission id reused by its owner for a different job (HTTP 409): the first job
    stands, the new one is not stored."""

    def __init__(self, submission_id: str, job_id: str):
        super().__init__(
            f"submission id {submission_id!r} was used for job {job_id} with a different job file; "
            "use a new id for a new job"
        )
        self.job_id = job_id


def is_job_id(value: object) -> bool:
    """Whether ``value`` is an id as the store hands them out: 1-18 ASCII digits. Not
    ``str.isdigit``, which also takes '²' and Arabic-Indic digits (``int('٥') == 5``), and
    at most 18 digits, so the id always fits SQLite's 64-bit integer."""
    text = str(value)
    return 0 < len(text) <= 18 and text.isascii() and text.isdigit()
