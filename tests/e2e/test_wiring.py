"""A process that would run a scheduler for an incomplete app exits at once, naming what is missing."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow]

#: The README's mistake: the workflow calls agents that nobody registers.
SHOP = """
from shepherd import App

app = App(alerts=())


@app.agent("payments.charge")
async def charge(request):
    return {"charged": request.payload}


@app.workflow("orders.process", agents=["shipping.create"])
async def process(ctx, order):
    await ctx.call("inventory.reserve", order, undo="inventory.release")
    return await ctx.call("payments.charge", order)
"""

#: What the one stderr line says (the call is on line 14 of shop.py).
MISSING = (
    "workflow 'orders.process' calls agents that are not registered: "
    "'inventory.reserve' (shop.py:14), 'inventory.release' (undo, shop.py:14), "
    "'shipping.create' (agents=); register each with @app.agent"
)
#: Seconds a command may take (a backstop: the refusal is immediate).
TIMEOUT = 60.0


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    """A directory holding `shop.py`, where commands run."""
    (tmp_path / "shop.py").write_text(SHOP)
    return tmp_path


def _env(shop: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHEPHERD_")}
    env["SHEPHERD_STORE"] = f"sqlite:///{shop / 'shop.db'}"
    return env


@pytest.mark.parametrize(
    "command",
    [
        ["run", "--app", "shop:app"],
        ["worker", "--app", "shop:app", "--roles", "scheduler"],
        ["worker", "--app", "shop:app", "--roles", "agent,scheduler,supervisor"],
    ],
)
def test_a_scheduler_does_not_start_for_an_incomplete_app(shop: Path, command: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "shepherd", *command],
        cwd=shop,
        env=_env(shop),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert done.returncode == 2, f"exit {done.returncode}; stderr:\n{done.stderr}"
    assert "shepherd ready" not in done.stdout
    assert "Traceback" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: incomplete app: "), done.stderr
    assert MISSING in last


def test_agent_and_supervisor_workers_start_for_an_incomplete_app(shop: Path) -> None:
    command = ["worker", "--app", "shop:app", "--roles", "agent,supervisor"]
    stderr_path = shop / "worker.stderr"
    with stderr_path.open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "shepherd", *command],
            cwd=shop,
            env=_env(shop),
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line)
        lines.put(None)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        line = lines.get(timeout=TIMEOUT)  # the first line, or None at EOF
        if line is None:
            code = process.wait(TIMEOUT)
            pytest.fail(f"exited {code} before it was ready; stderr:\n{stderr_path.read_text()}")
        assert line.startswith("shepherd ready: roles=agent,supervisor")
        process.send_signal(signal.SIGTERM)
        assert process.wait(TIMEOUT) == 0, stderr_path.read_text()
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(TIMEOUT)
        reader.join(TIMEOUT)
        assert process.stdout is not None
        process.stdout.close()
