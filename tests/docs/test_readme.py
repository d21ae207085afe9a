"""The README's example is one complete file that runs, and its commands are the CLI's."""

from __future__ import annotations

import shlex
import subprocess

import click
import pytest
from doctools import COMMAND_TIMEOUT, REPO, Session, code_blocks, session_steps

from shepherd.cli.commands import cli

README = REPO / "README.md"


def example() -> str:
    (block,) = code_blocks(README.read_text(), "python")
    return block.text


def commands() -> list[list[str]]:
    """The `shepherd ...` lines of the README's bash blocks."""
    found = []
    for block in code_blocks(README.read_text(), "bash"):
        for line in block.text.splitlines():
            words = shlex.split(line, comments=True)
            if words[:1] == ["shepherd"]:
                found.append(words)
    return found


def test_the_commands_use_the_cli_convention() -> None:
    """Each parses as the CLI defines it, and names the app as `--app shop:app`."""
    shown = commands()
    assert {words[1] for words in shown} >= {"run", "worker", "tasks", "show", "retry", "cancel"}
    for words in shown:
        assert "--app" in words, shlex.join(words)
        assert words[words.index("--app") + 1] == "shop:app", shlex.join(words)
        command = cli.get_command(click.Context(cli), words[1])
        assert command is not None, shlex.join(words)
        try:
            command.make_context(words[1], words[2:])  # parses only: no app is imported
        except click.UsageError as exc:
            pytest.fail(f"`{shlex.join(words)}`: {exc.format_message()}")


@pytest.mark.slow
def test_the_example_runs_and_prints_what_the_readme_shows(session: Session) -> None:
    (session.cwd / "shop.py").write_text(example())
    steps = session_steps(README.read_text())
    assert [getattr(step, "line", None) for step in steps] == ["python shop.py"]
    session.play(steps)
    session.play(steps)  # the same key again: the same task, the same result


@pytest.mark.slow
def test_the_operator_commands_run_against_the_example(session: Session) -> None:
    """After the example ran, its commands work on its store (TASK: the order's key)."""
    (session.cwd / "shop.py").write_text(example())
    session.play(session_steps(README.read_text()))
    for words in commands():
        words = ["A-1001" if word == "TASK" else word for word in words]
        if words[1] in ("run", "worker"):
            line = session.start_worker(words, {})
            assert line.startswith("shepherd ready:"), line
            assert session.worker is not None
            assert session.worker.interrupt() == 0, session.worker.stderr()
            session.worker = None
        elif words[1] in ("tasks", "show", "workers"):
            done = subprocess.run(
                words,
                cwd=session.cwd,
                env=session.env({}),
                capture_output=True,
                text=True,
                timeout=COMMAND_TIMEOUT,
                check=False,
            )
            assert done.returncode == 0, (shlex.join(words), done.stdout, done.stderr)
