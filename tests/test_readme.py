"""The README is the user's door: every command and Python block it shows runs from a clean
clone with nothing beside it (no ``../shared``), using the bundled data sets.

Commands that take longer than this test's 30 s bound carry a ``# takes ...`` comment in
the README and are skipped here; commands that need a running controller (``serve`` and
its clients) are covered by the runtime tests.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
LIVE = {"serve", "submit", "queue", "cancel", "nodes", "logs", "token"}
TIMEOUT = 30


def _blocks(language: set[str]) -> list[tuple[str, str]]:
    text = README.read_text(encoding="utf-8")
    found = re.finditer(r"```(\w*)\n(.*?)```", text, re.S)
    return [(m.group(1), m.group(2)) for m in found if m.group(1) in language]


def readme_commands() -> list[str]:
    """Each ``shapeshift`` command of the README's shell blocks (in ``console`` blocks, the
    lines after a ``$`` prompt; the rest there is output)."""
    commands = []
    for language, block in _blocks({"bash", "console", "shell", "sh"}):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = line.strip()
            if language == "console":
                if not line.startswith("$ "):
                    continue
                line = line[2:]
            if not line.startswith("shapeshift ") or "# takes" in line:
                continue
            words = shlex.split(line, comments=True)
            if words[1] not in LIVE:
                commands.append(" ".join(shlex.quote(w) for w in words))
    return commands


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    """A directory laid out as a fresh clone's top (the repository's examples and
    experiments), with no ``../shared`` beside it."""
    top = tmp_path_factory.mktemp("readme") / "clone"
    top.mkdir()
    for name in ("examples", "experiments"):
        (top / name).symlink_to(ROOT / name)
    assert not (top.parent / "shared").exists()
    return top


def test_the_readme_shows_commands():
    assert len(readme_commands()) >= 3


@pytest.mark.parametrize("command", readme_commands())
def test_each_readme_command_runs_from_a_clean_clone(clone, command):
    words = shlex.split(command)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "100"}
    done = subprocess.run(
        [sys.executable, "-m", "shapeshift.cli.main", *words[1:]],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT * 4,  # the bound is the README's promise; the margin is a loaded CI machine
    )
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 0, f"{command}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"


def test_the_readme_python_blocks_run_from_a_clean_clone(clone, monkeypatch):
    monkeypatch.chdir(clone)
    for _, block in _blocks({"python"}):
        if "# takes" in block:
            continue
        exec(compile(block, str(README), "exec"), {"__name__": "readme"})
