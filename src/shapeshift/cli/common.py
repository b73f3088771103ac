"""What every command shares: turning input errors into one line and exit code 2, and a
progress bar that only appears on an interactive terminal."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from shapeshift.errors import InputError
from shapeshift.model import ModelError

F = TypeVar("F", bound=Callable[..., Any])

console = Console()
err_console = Console(stderr=True, emoji=False)

#: Exit status for bad user input (as argparse and click use for usage errors).
EXIT_INPUT = 2
#: Exit status of a simulation that left jobs unfinished (its averages cover completed jobs only).
EXIT_UNFINISHED = 3


def fail(message: str) -> typer.Exit:
    """Print ``error: message`` on stderr and return the exit to raise. The message is
    shown literally: user input in it (``a:b:c``, ``[x]``) is never read as markup or
    emoji codes."""
    err_console.print(Text.assemble(("error:", "bold red"), " ", message), highlight=False, soft_wrap=True)
    return typer.Exit(EXIT_INPUT)


def usage_error_line(exc: Exception) -> None:
    """Click's usage errors (a bad option value, an unknown option, a missing argument) as
    one ``error:`` line naming the command, like every other refusal, instead of typer's
    boxed panel of six or more lines; the exit status stays click's 2."""
    if type(exc).__name__ == "NoArgsIsHelpError":  # the help was printed already
        return
    ctx = getattr(exc, "ctx", None)
    message = " ".join(str(getattr(exc, "format_message", exc.__str__)()).split())
    where = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
    fail(message + where)


def os_error_message(exc: OSError) -> str:
    """``/proc/nope: No such file or directory``: the path and what is wrong with it."""
    where = exc.filename if exc.filename is not None else ""
    if isinstance(exc, FileExistsError | NotADirectoryError):
        reason = "a file is in the way where a directory is needed"
    elif isinstance(exc, IsADirectoryError):
        reason = "is a directory where a file is needed"
    else:
        reason = exc.strerror or str(exc)
    return f"{where}: {reason}" if where else reason


def guarded(fn: F) -> F:
    """Report ``InputError``/``ModelError`` as one clear line and exit 2, never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (InputError, ModelError) as exc:
            raise fail(str(exc)) from None
        except BrokenPipeError:  # the reader went away (``| head``): nothing left to say
            raise typer.Exit(0) from None
        except OSError as exc:
            # A path the user gave cannot be read or written (a file where a directory is
            # expected, no permission, a full disk): name it, never a traceback.
            raise fail(os_error_message(exc)) from None

    return wrapper  # type: ignore[return-value]


def output_dir(path: Path | None, flag: str = "--out") -> Path | None:
    """Create the output directory ``path`` now, before any work, so a path that cannot be
    written fails at once with one line (not after an hour of simulation)."""
    if path is None:
        return None
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".shapeshift-write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise InputError(f"cannot write here: {os_error_message(exc)}", field=flag) from None
    return path


def show_progress(quiet: bool) -> bool:
    return not quiet and sys.stderr.isatty()


@contextmanager
def progress_bar(description: str, enabled: bool) -> Iterator[Callable[[int, int], None]]:
    """Yield ``update(done, total)``; a no-op unless ``enabled``."""
    if not enabled:
        yield lambda done, total: None
        return
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
    ) as bar:
        task = bar.add_task(description, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update
