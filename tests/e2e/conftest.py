"""Harness for the CLI tests: run `python -m shepherd` for real, against a SQLite file in tmp_path.

`shepherd_cli` runs one command to its end; `shepherd_cli_in_process` runs it
the same way in the test's own process (support.cli_inprocess: for tests of
what a command prints and stores, where the process is not the point);
`shepherd_process` starts a
long-running one (`run`, `worker`) and waits for its readiness line, with a
deadline, and always stops it. Commands take the app as `--app cliapp:app`
(the module `cliapp.py` in the working directory) and find the store in
SHEPHERD_STORE. `put_task` writes a task in a chosen state straight into
that store, at a chosen time, for the commands that only read.
"""

from __future__ import annotations

import asyncio
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from shepherd.core.records import JsonValue
from shepherd.core.states import ProcessState
from shepherd.store.contract import NewTask
from shepherd.store.sqlite import SQLiteStore
from shepherd.testing import FakeClock
from support.cli_inprocess import run_in_process
from support.processes import pump_lines

#: The app the tests run: a two-step workflow, and one whose code raises.
CLI_APP = """
from shepherd import App, RetryPolicy, TransientError

app = App(alerts=())
not_an_app = 42


@app.agent("greet")
async def greet(request):
    return {"greeting": "hello " + request.payload["name"]}


@app.agent("shout")
async def shout(request):
    return {"shouted": request.payload["greeting"].upper()}


@app.workflow("hello")
async def hello(ctx, data):
    greeting = await ctx.call("greet", data)
    return await ctx.call("shout", greeting)


@app.workflow("broken")
async def broken(ctx, data):
    raise RuntimeError("boom")


@app.agent("ship", retry=RetryPolicy(max_attempts=2, initial_delay=0.01, max_delay=0.01))
async def ship(request):
    if "address" not in request.payload:
        raise TransientError("the carrier wants an address")
    return {"shipped_to": request.payload["address"]}


@app.workflow("deliver", max_failures=1)
async def deliver(ctx, data):
    return await ctx.call("ship", data, within=0.5)
"""

#: Seconds any one CLI command may take before the test fails.
COMMAND_TIMEOUT = 60.0
#: Seconds a long-running command may take to print its readiness line.
READY_TIMEOUT = 30.0

Cli = Callable[..., subprocess.CompletedProcess[str]]
PutTask = Callable[..., str]

#: The scheduler `put_task` claims tasks as (no such process runs).
_ELSEWHERE = "elsewhere:1:aa/s"


@dataclass
class CliProcess:
    """A long-running `shepherd` process whose stdout is read by a thread."""

    process: subprocess.Popen[str]
    stderr_path: Path
    lines: queue.Queue[str | None] = field(default_factory=queue.Queue)
    pump: threading.Thread | None = None
    #: The `shepherd ready: ...` line, once seen.
    ready_line: str = ""

    def stderr(self) -> str:
        """What the process wrote to stderr so far."""
        return self.stderr_path.read_text(errors="replace")

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> str:
        """Block until the `shepherd ready:` line, or fail after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=remaining)
            except queue.Empty:
                break
            if line is None:
                code = self.process.wait(COMMAND_TIMEOUT)
                pytest.fail(f"exited {code} before it was ready; stderr:\n{self.stderr()}")
            if line.startswith("shepherd ready:"):
                self.ready_line = line
                return line
        pytest.fail(f"not ready within {timeout} s; stderr:\n{self.stderr()}")

    def terminate(self, timeout: float = COMMAND_TIMEOUT) -> int:
        """SIGTERM the process and return its exit code (a graceful stop is 0)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout)

    def close(self) -> None:
        """SIGKILL the process if it still runs, reap it, then close its pipe."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(COMMAND_TIMEOUT)
        if self.pump is not None:
            self.pump.join(COMMAND_TIMEOUT)  # the pipe is at EOF once the process is gone
        if self.process.stdout is not None:
            self.process.stdout.close()


@pytest.fixture(params=["sqlite", "postgres"])
def shared_store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store every process of the test opens: one SQLite file, or one PostgreSQL database."""
    if request.param == "postgres":
        url: str = request.getfixturevalue("postgres_url")
        return url
    return f"sqlite:///{tmp_path}/shared.db"


@pytest.fixture
def cli_dir(tmp_path: Path) -> Path:
    """A working directory holding the test app module `cliapp.py`."""
    (tmp_path / "cliapp.py").write_text(CLI_APP)
    return tmp_path


@pytest.fixture
def cli_store_url(cli_dir: Path) -> str:
    """A fresh SQLite store in the test's directory."""
    return f"sqlite:///{cli_dir / 'shepherd.db'}"


@pytest.fixture
def cli_env(cli_store_url: str) -> dict[str, str]:
    """The environment of every command: the test's store in SHEPHERD_STORE."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHEPHERD_")}
    env["SHEPHERD_STORE"] = cli_store_url
    return env


@pytest.fixture
def shepherd_cli(cli_dir: Path, cli_env: dict[str, str]) -> Cli:
    """Run `python -m shepherd ARGS...` to its end; return the completed process."""

    def run(*args: str, stdin: str | None = None, env: dict[str, str] | None = None) -> Any:
        """`env` replaces the whole environment (start from the `cli_env` fixture)."""
        return subprocess.run(
            [sys.executable, "-m", "shepherd", *args],
            cwd=cli_dir,
            env=cli_env if env is None else env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT,
            check=False,
        )

    return run


@pytest.fixture
def shepherd_cli_in_process(cli_dir: Path, cli_env: dict[str, str]) -> Cli:
    """`shepherd_cli`, run in this process: the same arguments, the same result."""

    def run(*args: str, stdin: str | bytes | None = None, env: dict[str, str] | None = None) -> Any:
        """`env` replaces the whole environment (start from the `cli_env` fixture)."""
        return run_in_process(args, cwd=cli_dir, env=cli_env if env is None else env, stdin=stdin)

    return run


@pytest.fixture
def shepherd_process(
    cli_dir: Path, cli_env: dict[str, str]
) -> Iterator[Callable[..., AbstractContextManager[CliProcess]]]:
    """Start `python -m shepherd ARGS...`, wait until it is ready; kill it at the end."""
    started: list[CliProcess] = []

    @contextmanager
    def start(*args: str, env: dict[str, str] | None = None) -> Iterator[CliProcess]:
        stderr_path = cli_dir / f"process-{len(started)}.stderr"
        with stderr_path.open("w") as stderr:
            process = subprocess.Popen(
                [sys.executable, "-m", "shepherd", *args],
                cwd=cli_dir,
                env=cli_env if env is None else env,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
            )
        handle = CliProcess(process=process, stderr_path=stderr_path)
        started.append(handle)
        assert process.stdout is not None
        handle.pump = threading.Thread(
            target=pump_lines, args=(process.stdout, handle.lines), daemon=True
        )
        handle.pump.start()
        try:
            handle.wait_ready()
            yield handle
        finally:
            handle.close()

    try:
        yield start
    finally:
        for handle in started:
            handle.close()


@pytest.fixture
def put_task(cli_store_url: str) -> PutTask:
    """Write a task into the test's store: submitted at `at` (now), then put in `state`.

    `put_task(workflow="hello", state=ProcessState.PENDING, *, key=None,
    error=None, at=None)` returns the task's id. An ended task other than
    `processed` gets `error` (default {"reason": "it failed"}); a `processing`
    one is left claimed by a process that does not exist. Put pending tasks
    last: a task put in another state must be the only claimable one.
    """

    def put(
        workflow: str = "hello",
        state: ProcessState = ProcessState.PENDING,
        *,
        key: str | None = None,
        error: JsonValue = None,
        at: datetime | None = None,
    ) -> str:
        when = datetime.now(UTC) if at is None else at
        failure = {"reason": "it failed"} if error is None else error
        return asyncio.run(_put(cli_store_url, workflow, state, key, failure, when))

    return put


async def _put(
    url: str, workflow: str, state: ProcessState, key: str | None, error: JsonValue, at: datetime
) -> str:
    store = SQLiteStore(url, clock=FakeClock(at))
    await store.open()
    try:
        task_id = (await store.submit_task(NewTask(workflow=workflow, input={}, key=key))).task_id
        if state is ProcessState.PENDING:
            return task_id
        claimed = await store.claim_tasks(locked_by=_ELSEWHERE, limit=10_000)
        others = [task.id for task in claimed if task.id != task_id]
        if others:
            await store.release_tasks(others, locked_by=_ELSEWHERE)
            raise AssertionError("put_task: put the pending tasks after the others")
        epoch = next(task.lock_epoch for task in claimed if task.id == task_id)
        if state is ProcessState.PROCESSED:
            await store.finish_task(task_id, locked_by=_ELSEWHERE, epoch=epoch, result={"ok": True})
        elif state is not ProcessState.PROCESSING:
            await store.fail_task(
                task_id, locked_by=_ELSEWHERE, epoch=epoch, state=state, error=error
            )
        return task_id
    finally:
        await store.close()
