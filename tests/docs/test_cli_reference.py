"""The command-line reference matches the commands: every command has its section, every
option it shows exists, and the resources and partitions sessions print what the page shows.
"""

from __future__ import annotations

import re
import shlex
from datetime import UTC, datetime

import click
import pytest
from doctools import DOCS, Command, Session, code_blocks, session_steps

from shepherd.cli.commands import cli
from shepherd.cli.render import print_task
from shepherd.core.records import Step
from shepherd.core.resources import Resolution, Resource
from shepherd.core.states import ProcessState, StepState
from support.records import task_record

PAGE = DOCS / "reference" / "cli.md"
#: The groups whose every subcommand is described, with its options, in its own section.
GROUPS = ("resources", "partitions")


def sections() -> dict[str, str]:
    """The page's `## ` sections by heading."""
    parts = re.split(r"^## (.+)$", PAGE.read_text(), flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def command_of(words: list[str]) -> tuple[str, click.Command]:
    """The `shepherd` (sub)command a synopsis line names, and its path (`resources add`)."""
    command: click.Command | None = cli.get_command(click.Context(cli), words[1])
    assert command is not None, words
    path = words[1]
    # A group that runs without a subcommand (`shepherd alerts [--open]`) is a command itself.
    if isinstance(command, click.Group) and not (
        command.invoke_without_command and (words[2:] or ["-"])[0].startswith(("-", "["))
    ):
        sub = command.get_command(click.Context(command), words[2])
        assert sub is not None, words
        command, path = sub, f"{path} {words[2]}"
    return path, command


def long_options(command: click.Command) -> set[str]:
    return {
        name
        for param in command.params
        for name in param.opts
        if name.startswith("--") and name != "--help"
    }


def synopsis_lines() -> list[tuple[str, list[str]]]:
    """(section, words) of each `$ shepherd ...` line in the page's console blocks."""
    return [
        (heading, shlex.split(line[2:]))
        for heading, text in sections().items()
        for block in code_blocks(text, "console")
        for line in block.text.splitlines()
        if line.startswith("$ shepherd ")
    ]


def test_every_command_has_a_section() -> None:
    headings = " ".join(sections())
    names = cli.list_commands(click.Context(cli))
    assert [name for name in names if not re.search(rf"\b{name}\b", headings)] == []


def test_every_option_shown_is_an_option_of_its_command() -> None:
    for heading, words in synopsis_lines():
        path, command = command_of(words)
        shown = {
            word.strip("[]").split("=")[0] for word in words if word.strip("[").startswith("--")
        }
        unknown = shown - long_options(command) - {"--help"}
        assert not unknown, f"section {heading!r}: `shepherd {path}` has no {sorted(unknown)}"


@pytest.mark.parametrize("group", GROUPS)
def test_each_subcommand_is_shown_with_every_option(group: str) -> None:
    text = sections()[group]
    command = cli.get_command(click.Context(cli), group)
    assert isinstance(command, click.Group)
    for name in command.list_commands(click.Context(command)):
        sub = command.get_command(click.Context(command), name)
        assert sub is not None
        assert f"$ shepherd {group} {name} " in text, f"no synopsis of `shepherd {group} {name}`"
        missing = [option for option in sorted(long_options(sub)) if option not in text]
        assert missing == [], f"`shepherd {group} {name}`: {missing} not described"


def sessions() -> list[Command]:
    """The commands of the resources and partitions sections that show an output, in order.

    A console block whose commands show nothing is a synopsis, not a session.
    """
    steps = []
    for group in GROUPS:
        for block in code_blocks(sections()[group], "console"):
            shown = session_steps(f"```console\n{block.text}```\n")
            assert all(isinstance(step, Command) for step in shown)
            commands = [step for step in shown if isinstance(step, Command)]
            if any(step.expected for step in commands):
                steps += commands
    return steps


@pytest.mark.slow
def test_the_resources_and_partitions_sessions_print_what_the_page_shows(
    session: Session,
) -> None:
    steps = sessions()
    assert len(steps) == 23
    session.play(list(steps))


def test_shows_resolutions_table_is_the_one_print_task_prints(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (block,) = [b for b in code_blocks(sections()["show"], "console") if "resolutions" in b.text]
    shown = block.text.split("resolutions\n", 1)[1].splitlines()
    now = datetime(2026, 1, 1, tzinfo=UTC)
    resource = Resource(name="users-db-2", kind="sqlite", info={"path": "users-2.db"})
    step = Step(
        task_id="01a20aa41214dd808c31",
        seq=1,
        agent="users.write",
        state=StepState.COMPLETED,
        resolution=Resolution(entity="user-1", partition="p1", resource=resource),
    )
    task = task_record(
        id=step.task_id,
        workflow="users.visit",
        input={},
        process_state=ProcessState.PROCESSED,
        lock_epoch=1,
        not_before=now,
        created_at=now,
        updated_at=now,
        steps=(step,),
    )
    monkeypatch.setenv("COLUMNS", "80")

    print_task(task, [])

    printed = capsys.readouterr().out.split("\nresolutions\n", 1)[1].split("\n\n", 1)[0]
    assert printed.splitlines() == shown
