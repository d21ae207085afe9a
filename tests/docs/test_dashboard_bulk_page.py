"""The dashboard how-to's bulk triage: its curl examples, run against a real `shepherd dashboard`.

The store holds the page's tasks: two of `orders.process` in `error`, each
with its open alert. Each `$ curl ...` line runs in a shell with `DASHBOARD`
and `TOKEN` set, and prints what the page shows, up to what changes from run
to run: the task ids (which the page's ids stand for, in order of first
appearance) and the bulk action's id.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from doctools import DOCS, code_blocks

from shepherd.store import open_store
from support.factories import tasks_in_error
from support.processes import pump_lines

PAGE = DOCS / "howto" / "dashboard.md"
TOKEN = "a-token-for-the-bulk-examples"
_OWNER = "elsewhere:1:0000/s"
_READY = re.compile(r"shepherd ready: dashboard=(http://\S+?)/? ")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def section(markdown: str, heading: str) -> str:
    """The text of the `## heading` section, up to the next `## `."""
    start = markdown.index(f"\n## {heading}\n")
    end = markdown.find("\n## ", start + 1)
    return markdown[start : None if end < 0 else end]


def _examples() -> list[tuple[str, str]]:
    """(command, output) of each curl line of the page's bulk section."""
    out = []
    for block in code_blocks(section(PAGE.read_text(), "Triage in bulk"), "console"):
        lines = block.text.splitlines()
        for n, line in enumerate(lines):
            if line.startswith("$ curl "):
                out.append((line[2:], lines[n + 1]))
    return out


def _in_error(url: str, n: int) -> list[str]:
    async def go() -> list[str]:
        store = open_store(url)
        await store.open()
        try:
            return await tasks_in_error(
                store,
                n,
                workflow="orders.process",
                keyed=False,
                locked_by=_OWNER,
                reason=lambda _: "card declined",
            )
        finally:
            await store.close()

    return asyncio.run(go())


@pytest.fixture
def dashboard(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A `shepherd dashboard` with a token over a store with the page's tasks: (URL, store)."""
    store = f"sqlite:///{tmp_path}/shop.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHEPHERD_")}
    env["SHEPHERD_DASHBOARD_TOKEN"] = TOKEN
    _in_error(store, 0)  # the store and its schema, before the dashboard opens it
    process = subprocess.Popen(
        [sys.executable, "-m", "shepherd", "dashboard", "--store", store, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    lines: queue.Queue[str | None] = queue.Queue()
    assert process.stdout is not None
    pump = threading.Thread(target=pump_lines, args=(process.stdout, lines), daemon=True)
    pump.start()
    try:
        while True:
            line = lines.get(timeout=60)
            assert line is not None, "the dashboard exited before it was ready"
            found = _READY.search(line + " ")
            if found:
                break
        yield found[1], store
    finally:
        process.terminate()
        process.wait(30)
        pump.join(30)  # it reads to the end of the output, which the exit closed
        process.stdout.close()


def test_the_curl_examples_print_what_the_page_shows(dashboard: tuple[str, str]) -> None:
    url, store = dashboard
    examples = _examples()
    assert len(examples) == 3
    page_ids = list(dict.fromkeys(re.findall(r"0193[0-9a-f]{16}", PAGE.read_text())))
    ids = _in_error(store, 2)
    # The page's ids, newest first (as the filter lists them), stand for the tasks made here.
    names = dict(zip(page_ids, ids[::-1], strict=True))
    env = {**os.environ, "DASHBOARD": url, "TOKEN": TOKEN}
    replies = []
    for command, shown in examples:
        for page_id, real in names.items():
            command = command.replace(page_id, real)
        done = subprocess.run(
            ["bash", "-c", command], capture_output=True, text=True, env=env, timeout=30, check=True
        )
        got = json.loads(done.stdout)
        expected = json.loads(shown)
        expected_ids = [names[i] for i in expected["done_ids"]]
        assert sorted(got["done_ids"]) == sorted(expected_ids), command
        assert {k: v for k, v in got.items() if k not in ("bulk", "done_ids")} == {
            k: v for k, v in expected.items() if k not in ("bulk", "done_ids")
        }
        replies.append(got)
    assert replies[1] == replies[0]  # the same Idempotency-Key: the same reply, acted on once
