"""A partition moved by the CLI, seen by every process's resolver: real processes, SQLite and PostgreSQL.

Two processes resolve `user-1` with a StoreResolver each; their refresh
interval is long, so only the wake-up that `shepherd partitions move` (a third
process) sends can tell them of the move. Both must see the new version, and
their next resolve must name the new resource; a restarted process resolves
to it too (the mapping is the store's, not the process's).
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from shepherd.testing import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

#: Seconds to wait for one answer or command before failing (a backstop, not a timing claim).
PATIENCE = 60.0

#: A process with a StoreResolver, answering commands read from stdin, one JSON line each:
#: `resolve ENTITY` -> the resolution and the version; `version` -> the version it has seen.
RESOLVER_PROCESS = """
import asyncio, json, sys

from shepherd import App


async def main(url):
    # Refreshes far apart: only a wake-up can tell this process of a move.
    app = App(
        url,
        alerts=(),
        resolver_refresh=3600.0,
        resolver_refresh_ahead=3600.0,
        sqlite_synchronous="NORMAL",
    )
    loop = asyncio.get_running_loop()
    async with app:
        print(json.dumps({"ready": True}), flush=True)
        while True:
            line = await loop.run_in_executor(None, sys.stdin.readline)
            if not line:
                return
            command, _, argument = line.strip().partition(" ")
            if command == "resolve":
                found = await app.resolver.resolve(argument)
                answer = {"resource": found.resource.name, "partition": found.partition}
            else:
                answer = {}
            answer["version"] = app.resolver.version
            print(json.dumps(answer), flush=True)


asyncio.run(main(sys.argv[1]))
"""


class ResolverProcess:
    """One resolver process: send a command, read its one-line JSON answer."""

    def __init__(self, script: Path, store_url: str, workdir: Path, name: str) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SHEPHERD_")}
        self.stderr_path = workdir / f"{name}.stderr"
        with self.stderr_path.open("w") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, str(script), store_url],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                env=env,
                cwd=workdir,
            )
        self.lines: queue.Queue[str | None] = queue.Queue()
        assert self.process.stdout is not None
        threading.Thread(target=self._pump, args=(self.process.stdout,), daemon=True).start()
        assert self._answer() == {"ready": True}

    def _pump(self, stream: Any) -> None:
        try:
            for line in stream:
                self.lines.put(line)
        finally:
            self.lines.put(None)

    def _answer(self) -> Any:
        try:
            line = self.lines.get(timeout=PATIENCE)
        except queue.Empty:
            pytest.fail(f"no answer within {PATIENCE} s; stderr:\n{self.stderr_path.read_text()}")
        if line is None:
            pytest.fail(f"the process ended; stderr:\n{self.stderr_path.read_text()}")
        return json.loads(line)

    def ask(self, command: str) -> Any:
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return self._answer()

    def stop(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()  # end of commands: it returns and closes its app
            try:
                self.process.wait(PATIENCE)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(PATIENCE)
        if self.process.stdout is not None:
            self.process.stdout.close()


@pytest.fixture
def start(tmp_path: Path, shared_store: str) -> Iterator[Any]:
    script = tmp_path / "resolver_process.py"
    script.write_text(RESOLVER_PROCESS)
    started: list[ResolverProcess] = []

    def start_one(name: str) -> ResolverProcess:
        process = ResolverProcess(script, shared_store, tmp_path, name)
        started.append(process)
        return process

    try:
        yield start_one
    finally:
        for process in started:
            process.stop()


def seen_by(process: ResolverProcess, version: int) -> Callable[[], bool]:
    """Whether `process`'s resolver has seen `version`, asked afresh at each call."""
    return lambda: bool(process.ask("version")["version"] == version)


def shepherd(store_url: str, *args: str) -> Any:
    """Run one `shepherd ... --json` command in a process of its own; its JSON output."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHEPHERD_")}
    completed = subprocess.run(
        [sys.executable, "-m", "shepherd", *args, "--store", store_url, "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=PATIENCE,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)


async def test_every_process_sees_a_move_and_resolves_to_the_new_resource(
    shared_store: str, start: Any
) -> None:
    shepherd(shared_store, "resources", "add", "db1", "--kind", "sqlite", "--info", '{"path": "1"}')
    shepherd(shared_store, "resources", "add", "db2", "--kind", "sqlite", "--info", '{"path": "2"}')
    shepherd(shared_store, "partitions", "move", "p1", "db1")
    shepherd(shared_store, "partitions", "assign", "user-1", "p1")
    a, b = start("a"), start("b")
    before = shepherd(shared_store, "partitions", "list")["version"]
    for process in (a, b):
        assert process.ask("resolve user-1") == {
            "resource": "db1",
            "partition": "p1",
            "version": before,
        }

    moved = shepherd(shared_store, "partitions", "move", "p1", "db2")

    assert (moved["previous"], moved["resource"]) == ("db1", "db2")
    after = shepherd(shared_store, "partitions", "list")["version"]
    assert after == before + 1
    for process in (a, b):
        await wait_until(
            seen_by(process, after),
            timeout=PATIENCE,
            interval=0.05,
            message="a process did not see the move",
        )
        assert process.ask("resolve user-1") == {
            "resource": "db2",
            "partition": "p1",
            "version": after,
        }

    a.stop()
    restarted = start("a-again")
    assert restarted.ask("resolve user-1") == {
        "resource": "db2",
        "partition": "p1",
        "version": after,
    }
