"""The dashboard how-to's JSON API: its curl examples, run against a served dashboard, print what it shows.

Two tasks of `orders.pay` (support.payments) end in `error` in a store; a real
`shepherd dashboard --token` serves that store; each `$ curl ...` line of the
section runs in a shell with DASHBOARD, TOKEN (anna's), TASK and OTHER set, and
prints what the page shows after it: task ids and instants are normalised, and
`…` on the page stands for any text (what the page leaves out).
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

from doctools import DOCS, INSTANT, TASK_ID, Command, Worker, session_steps

from shepherd import App, ProcessState
from support.payments import failed_task, register
from support.processes import pump_lines

PAGE = DOCS / "howto" / "dashboard.md"
SHARED = "the-shared-token-of-the-docs-test"


def section(markdown: str, heading: str) -> str:
    """The text of the `## heading` section, up to the next `## `."""
    start = markdown.index(f"\n## {heading}\n")
    end = markdown.find("\n## ", start + 1)
    return markdown[start : None if end < 0 else end]


def shape(text: str) -> str:
    """`text` with task ids and instants normalised, trailing space gone."""
    text = INSTANT.sub("<time>", TASK_ID.sub("<id>", text))
    return "\n".join(line.rstrip() for line in text.strip().splitlines())


def matches(shown: str, printed: str) -> bool:
    """Whether `printed` is what the page shows, `…` standing for any text."""
    pattern = ".*?".join(re.escape(part) for part in shape(shown).split("…"))
    return re.fullmatch(pattern, shape(printed), re.DOTALL) is not None


def test_the_section_has_its_examples_and_an_ellipsis_stands_for_any_text() -> None:
    commands = _curls()
    assert len(commands) == 7
    assert matches('{"a":"0192f3c4a1b2c3d4e5f6",…}', '{"a":"0193aaaaaaaaaaaaaaaa","b":1}')
    assert not matches('{"a":1,…}', '{"a":2,"b":1}')


def _curls() -> list[Command]:
    steps = session_steps(section(PAGE.read_text(), "JSON API"))
    commands = [s for s in steps if isinstance(s, Command)]
    assert all(c.line.startswith("curl ") for c in commands)
    return commands


async def _failed_tasks(store: str) -> tuple[str, str, str]:
    """anna's token, and two tasks of `orders.pay` in `error` in `store` (the second newer)."""
    app = App(store, alerts=(), supervisor_interval=0.1, poll_interval=0.05, lease_ttl=1.0)
    register(app)
    try:
        anna = await app.operations.add_operator("anna")
        async with app.running():
            task = await failed_task(app, {"sku": "pen"})
            other = await failed_task(app, {"sku": "ink"})
    finally:
        await app.close()
    return anna, task, other


async def _after(store: str, task: str, other: str) -> None:
    """What the examples did, read from the store."""
    app = App(store, alerts=())
    try:
        retried = await app.get_task(task)
        assert retried.steps[1].request == {"sku": "pen", "card": "4242"}
        assert (await app.get_task(other)).process_state is ProcessState.COMPENSATING
        (acknowledged,) = [a for a in await app.alerts() if a.task_id == other]
        assert acknowledged.acknowledged_by == "anna"
    finally:
        await app.close()


def test_the_curl_examples_print_what_the_page_shows(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/shop.db"
    anna, task, other = asyncio.run(_failed_tasks(store))
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHEPHERD_")}
    dashboard = _serve(tmp_path, store, env)
    try:
        url = dashboard.first_line().split("dashboard=", 1)[1].split()[0].rstrip("/")
        variables = {"DASHBOARD": url, "TOKEN": anna, "TASK": task, "OTHER": other}
        for command in _curls():
            done = subprocess.run(
                ["bash", "-c", command.line],
                env={**env, **variables},
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            assert done.returncode == 0, (command.line, done.stderr)
            assert matches(command.expected, done.stdout), (
                f"line {command.where}: `{command.line}` printed\n{done.stdout}\n"
                f"but the page shows\n{command.expected}"
            )
    finally:
        dashboard.interrupt()
    asyncio.run(_after(store, task, other))


def _serve(directory: Path, store: str, env: dict[str, str]) -> Worker:
    """`shepherd dashboard` on any free port, behind the shared token (its readiness line waited for)."""
    stderr_path = directory / "dashboard.log"
    with stderr_path.open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "shepherd", "dashboard", "--store", store, "--port", "0"],
            cwd=directory,
            env={**env, "SHEPHERD_DASHBOARD_TOKEN": SHARED},
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
    served = Worker(process=process, stderr_path=stderr_path)
    assert process.stdout is not None
    served.pump = threading.Thread(target=pump_lines, args=(process.stdout, served.lines))
    served.pump.start()
    return served
