"""User-facing input errors.

Every problem with a file the user gave us becomes one ``InputError`` that names the
file, the line and the field, so the CLI can print a single clear sentence and exit
with status 2 instead of a traceback.
"""

from __future__ import annotations


class InputError(Exception):
    """Bad user input, located as precisely as we can: file, line (1-based), field."""

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None, field: str | None = None):
        super().__init__(message)
        self.message = message
        self.path = path
        self.line = line
        self.field = field

    def __str__(self) -> str:
        where = []
        if self.path:
            where.append(str(self.path) + (f":{self.line}" if self.line is not None else ""))
        elif self.line is not None:
            where.append(f"line {self.line}")
        if self.field:
            where.append(f"field '{self.field}'")
        prefix = ", ".join(where)
        return f"{prefix}: {self.message}" if prefix else self.message
