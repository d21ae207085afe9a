"""`shepherd run --log-format json` and `shepherd top --once`, run for real on a SQLite file.

A step whose agent has a bug sends its task to `error`: every line the worker
writes to stderr is one JSON object, the lines about the task carry its id,
workflow, step, attempt and epoch, and `shepherd top` shows the task in
`error` with its reason.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from shepherd.core.states import ProcessState
from support.cli_checks import ok
from support.processes import as_from_a_terminal

Cli = Callable[..., subprocess.CompletedProcess[str]]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

#: A workflow whose one step always raises: a bug, given up after two tries.
LOG_APP = """
from shepherd import App, RetryPolicy

app = App(alerts=["log"])


@app.agent("payments.charge", retry=RetryPolicy(max_attempts=2, initial_delay=0.01, max_delay=0.01))
async def charge(request):
    raise ValueError("the card number is missing")


@app.workflow("orders.pay")
async def pay(ctx, data):
    return await ctx.call("payments.charge", data)
"""
#: Seconds the worker may take to log what the test waits for.
LOG_DEADLINE = 60.0
FIELDS = ("task_id", "workflow", "seq", "agent", "attempt", "epoch")


def wait_logged(worker: Any, found: Callable[[list[dict[str, Any]]], bool]) -> None:
    """Poll the worker's stderr, with a deadline, until `found(its JSON lines)` holds."""
    deadline = time.monotonic() + LOG_DEADLINE
    while True:
        text = worker.stderr()
        lines = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
        if found(lines):
            return
        if time.monotonic() > deadline or worker.process.poll() is not None:
            pytest.fail(f"the worker did not log it within {LOG_DEADLINE} s; stderr:\n{text}")
        time.sleep(0.05)  # a poll of the log file, bounded by the deadline above


@pytest.fixture
def log_app(cli_dir: Path) -> str:
    (cli_dir / "logapp.py").write_text(LOG_APP)
    return "logapp:app"


def test_json_logs_carry_the_task_fields_and_top_shows_the_failure(
    shepherd_cli: Cli, shepherd_process: Any, log_app: str, cli_env: dict[str, str]
) -> None:
    with shepherd_process("run", "--app", log_app, "--log-format", "json") as worker:
        submitted = shepherd_cli("submit", "--app", log_app, "orders.pay", '{"amount": 12}')
        task_id = ok(submitted).strip()

        def ended(lines: list[dict[str, Any]]) -> bool:
            mine = [line for line in lines if line.get("task_id") == task_id]
            return any(line.get("event") == "error" for line in mine) and any(
                line["logger"] == "shepherd.alerts" for line in mine
            )

        wait_logged(worker, ended)
        assert worker.terminate() == 0
        stderr = worker.stderr()
    assert worker.ready_line.startswith("shepherd ready:")
    # The process is gone and its stdout read to the end: the ready line was all of it.
    rest = [worker.lines.get_nowait() for _ in range(worker.lines.qsize())]
    assert rest == [None]

    lines = stderr.splitlines()
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    assert all(isinstance(r, dict) for r in records), stderr
    for record in records:
        assert {"time", "level", "logger", "message"} <= record.keys(), record
        assert record["time"].endswith("Z")
    about = [r for r in records if r.get("task_id") == task_id]
    for record in about:
        missing = [name for name in FIELDS if name not in record]
        assert missing == [], (missing, record)
    # The scheduler's lines know the whole task; an agent's know its step and epoch.
    events = [(r["event"], r["seq"], r["agent"], r["attempt"]) for r in about if "event" in r]
    assert events == [
        ("claimed", None, None, None),
        ("started", 1, "payments.charge", 1),
        ("failed", 1, "payments.charge", 1),
        ("error", 1, "payments.charge", 1),
    ]
    for record in about:
        if record["logger"] == "shepherd.tasks":
            assert (record["workflow"], record["epoch"]) == ("orders.pay", 1), record
    (last_try,) = [r for r in about if r["logger"] == "shepherd.agent" and r["level"] == "ERROR"]
    assert (last_try["seq"], last_try["agent"], last_try["attempt"], last_try["epoch"]) == (
        1,
        "payments.charge",
        1,
        1,
    )
    assert last_try["exception"].splitlines()[-1] == "ValueError: the card number is missing"
    assert '"amount"' not in stderr  # the payload is never logged
    assert any(r["message"] == "shepherd stopping" for r in records)

    wide = {**cli_env, "COLUMNS": "160"}  # the reason is cut to the terminal's width
    frame = ok(shepherd_cli("top", "--app", log_app, "--once", env=wide))

    assert "tasks by process_state" in frame
    states = dict(
        line.split() for line in frame.splitlines() if len(line.split()) == 2
    )  # "error   1"
    assert states["error"] == "1"
    assert states["pending"] == states["processing"] == states["processed"] == "0"
    (failure,) = [line for line in frame.splitlines() if task_id in line]
    assert "orders.pay" in failure
    assert "open" in failure  # its alert is open
    assert "step 1 (payments.charge) raised" in failure


def test_an_unknown_log_format_is_a_usage_error(
    shepherd_cli: Cli, log_app: str, cli_dir: Path, cli_env: dict[str, str]
) -> None:
    flag = shepherd_cli("run", "--app", log_app, "--log-format", "xml")
    env = shepherd_cli("run", "--app", log_app, env={**cli_env, "SHEPHERD_LOG_FORMAT": "yaml"})

    assert flag.returncode == 2
    assert "Invalid value for '--log-format': 'xml' is not one of 'text', 'json'" in flag.stderr
    assert env.returncode == 2
    assert "'yaml' is not one of 'text', 'json'" in env.stderr
    assert not (cli_dir / "shepherd.db").exists()  # nothing was opened


def test_top_once_without_failures_and_without_a_store(
    shepherd_cli: Cli, log_app: str, put_task: Callable[..., str]
) -> None:
    missing = shepherd_cli("top", "--app", log_app, "--once")
    assert missing.returncode == 6
    assert "no SQLite store" in missing.stderr

    put_task("orders.pay", ProcessState.PROCESSED)
    frame = ok(shepherd_cli("top", "--once"))

    assert "processed 1" in " ".join(frame.split())
    assert "recent failures: none in error" in frame
    assert "breakers: none yet" in frame
    assert "workers alive: 0" in frame


def test_top_live_redraws_in_a_terminal_until_ctrl_c(
    cli_dir: Path, cli_env: dict[str, str], put_task: Callable[..., str]
) -> None:
    put_task("orders.pay", ProcessState.PROCESSED)
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "shepherd", "top", "--interval", "0.2"],
        cwd=cli_dir,
        env={**cli_env, "COLUMNS": "100", "TERM": "xterm"},
        stdin=terminal,
        stdout=terminal,
        stderr=terminal,
        preexec_fn=as_from_a_terminal,
    )
    os.close(terminal)
    shown = b""
    try:
        # The first frame has no rate between frames yet ("…"); a redraw has one.
        deadline = time.monotonic() + LOG_DEADLINE
        while not re.search(r"last 0\.2s +\d+\.\d\d", _plain(shown)):
            assert time.monotonic() < deadline, f"no redraw with a rate:\n{_plain(shown)}"
            assert process.poll() is None, f"top exited {process.returncode}:\n{_plain(shown)}"
            shown += _read(controller)
        process.send_signal(signal.SIGINT)
        while process.poll() is None:  # keep reading: a full terminal would block its writes
            assert time.monotonic() < deadline, "top did not stop on SIGINT"
            shown += _read(controller)
        code = process.wait(LOG_DEADLINE)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(LOG_DEADLINE)
        os.close(controller)

    assert code == 0  # Ctrl-C is how one leaves it: not an error
    assert "processed 1" in " ".join(_plain(shown).split())


def _read(controller: int) -> bytes:
    """What the terminal received within half a second (nothing once the process is gone)."""
    if not select.select([controller], [], [], 0.5)[0]:
        return b""
    try:
        return os.read(controller, 65536)
    except OSError:  # EIO: the other end is closed
        return b""


def _plain(raw: bytes) -> str:
    """What a terminal shows, roughly: the output without its escape sequences."""
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r", "", raw.decode(errors="replace"))
