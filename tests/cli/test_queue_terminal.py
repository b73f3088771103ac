"""``shapeshift queue`` facing hostile job names: escape sequences and newlines are
refused at submit and escaped on output, long names cannot push columns off an
80-column screen, and piped output never cuts the reason."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console
from typer.testing import CliRunner

from shapeshift.cli.main import app
from shapeshift.cli.queue_cmd import queue_table
from shapeshift.errors import InputError
from shapeshift.runtime.jobfile import parse_submission
from shapeshift.safe_text import has_control, visible

NOW = 1_800_000_000.0
REASON = "needs 4 GPUs, 2 free; 3 jobs ahead of it in the queue under fifo order with backfill off"


def job(job_id: str, name: str, state: str = "queued", user: str = "alice", reason: str = "") -> dict:
    running = state == "running"
    return {
        "id": job_id,
        "name": name,
        "user": user,
        "state": state,
        "plan": "dp2" if running else "",
        "placement": "node000:2" if running else "",
        "iterations": 100,
        "progress": 10 if running else 0,
        "submit_time": NOW - 60,
        "first_start": NOW - 30 if running else None,
        "end_time": None,
        "reason": reason,
    }


HOSTILE = [
    job("1", "evil\x1b[2J\x1b]0;owned\x07name\nforged-row", reason=REASON),
    job("2", "n" * 200, state="running", user="u" * 60),
    job("3", "[bold red]markup[/] \u202eexe.txt"),
]


def render(width: int) -> str:
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, force_terminal=True, color_system=None)
    console.print(queue_table([dict(j) for j in HOSTILE], NOW, width=width, explain=False))
    return buffer.getvalue()


def test_names_are_escaped_not_interpreted():
    text = render(150)
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
    assert "evil\\x1b[2J" in text  # shown, as an escape (cut with an ellipsis further on)
    assert "forged-row" not in text  # the newline did not start a row of its own
    assert "[bold red]mar" in text  # brackets shown literally, not as Rich markup


@pytest.mark.parametrize("width", [80, 100, 150])
def test_long_names_do_not_push_columns_off_the_screen(width):
    lines = render(width).splitlines()
    assert max(len(line) for line in lines) <= width
    header = lines[1]
    for column in ("id", "name", "user", "state", "progress", "time", "reason"):
        assert column in header, (column, header)
    rows = [line for line in lines if line.startswith((" 1 ", " 2 ", " 3 "))]
    assert [r.split()[0] for r in rows] == ["1", "2", "3"]
    assert "running" in rows[1] and "10/100" in rows[1]  # the state and progress right of a 200-char name
    # The reason wraps within the screen: all its words are there.
    assert " ".join(render(width).split()).count("backfill off") == 1


def test_piped_output_keeps_the_whole_reason_on_the_row(monkeypatch):
    class Client:
        @classmethod
        def from_state(cls, state):
            return cls()

        def jobs(self, states, user):
            return [dict(j) for j in HOSTILE]

    monkeypatch.setattr("shapeshift.runtime.remote.ControllerClient", Client)
    result = CliRunner().invoke(app, ["queue"])
    assert result.exit_code == 0, result.output
    row = next(line for line in result.output.splitlines() if line.startswith(" 1 "))
    assert row.rstrip().endswith(REASON)
    assert "\x1b" not in result.output and "forged-row" not in result.output


@pytest.mark.parametrize(
    ("name", "shown"),
    [("a\x1b[31mb", "\\x1b"), ("two\nlines", "\\x0a"), ("tab\there", "\\x09"), ("rtl\u202eoverride", "\\u202e")],
)
def test_control_characters_in_a_name_are_refused_at_submit(name, shown):
    body = json.dumps({"name": name, "command": "true", "iterations": 1})
    with pytest.raises(InputError) as err:
        parse_submission(body)
    assert err.value.field == "name" and shown in str(err.value) and "\n" not in str(err.value)


def test_printable_names_pass_and_visible_escapes_only_controls():
    assert has_control("résumé-训练 job_1") is None
    assert visible("a\x00b\x7fc\u2028d") == "a\\x00b\\x7fc\\u2028d"
