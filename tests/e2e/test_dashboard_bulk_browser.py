"""Triage in bulk in a real browser: fifty tasks in `error`, one action, every alert resolved.

A real `shepherd run` works the store (one SQLite file) and a real `shepherd
dashboard --token` serves it. Fifty orders fail the same way: the carrier's
agent refuses them until it is corrected (here: until a file says so, as a
deploy of the fix would). The operator corrects it, lists the errors, ticks
"all matching this filter", confirms the retry of exactly fifty, and sees
each task end `processed`, each alert resolve itself (by `task processed`),
and the overview come to 0 open alerts. A task's history records the bulk
retry, by the operator; its alert names what resolved it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, expect

from e2e.conftest import CliProcess
from e2e.test_dashboard_browser import PATIENCE, browser  # noqa: F401 - the fixture

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

Cli = Callable[..., subprocess.CompletedProcess[str]]
Start = Callable[..., AbstractContextManager[CliProcess]]

ORDERS = 50
SHARED = "shared-token-for-the-bulk-browser-test"

#: `ship` refuses every order until the file `fixed` exists (the corrected
#: agent); its tries run out at once, so each task ends in `error`, alerted.
BULK_APP = """
from pathlib import Path

from shepherd import App, RetryPolicy, TransientError

app = App(alerts=(), supervisor_interval=0.2, poll_interval=0.05)
FIXED = Path(__file__).with_name("fixed")


@app.agent("ship", retry=RetryPolicy(max_attempts=1, initial_delay=0.01, max_delay=0.01))
async def ship(request):
    if not FIXED.exists():
        raise TransientError("the carrier refuses the parcel format")
    return {"shipped": request.payload["order"]}


@app.workflow("deliver", max_failures=1)
async def deliver(ctx, data):
    return await ctx.call("ship", data, within=0.5)
"""

SUBMIT = f"""
import asyncio

from bulkapp import app
from shepherd import Submission


async def main():
    await app.open()
    try:
        ids = await app.submit_many(
            Submission("deliver", {{"order": n}}, key=f"order-{{n}}") for n in range({ORDERS})
        )
        print("\\n".join(ids))
    finally:
        await app.close()


asyncio.run(main())
"""


def _json(cli: Cli, *args: str, env: dict[str, str]) -> Any:
    done = cli(*args, "--json", env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_an_operator_retries_fifty_failed_tasks_in_one_action(
    browser: Browser,  # noqa: F811 - the fixture imported above
    shepherd_cli: Cli,
    shepherd_process: Start,
    cli_dir: Path,
    cli_env: dict[str, str],
) -> None:
    (cli_dir / "bulkapp.py").write_text(BULK_APP)
    (cli_dir / "submit_orders.py").write_text(SUBMIT)
    env = {**cli_env, "SHEPHERD_APP": "bulkapp:app"}
    with shepherd_process("run", env=env):
        added = shepherd_cli("tokens", "add", "anna", env=env)
        assert added.returncode == 0, added.stderr
        anna = added.stdout.splitlines()[0].rsplit(" ", 1)[1]
        submitted = subprocess.run(
            [sys.executable, "submit_orders.py"],
            cwd=cli_dir,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert submitted.returncode == 0, submitted.stderr
        task_ids = submitted.stdout.split()
        assert len(task_ids) == ORDERS

        with shepherd_process(
            "dashboard", "--port", "0", env={**env, "SHEPHERD_DASHBOARD_TOKEN": SHARED}
        ) as dashboard:
            base = dashboard.ready_line.split("dashboard=", 1)[1].split()[0]
            page = browser.new_page()
            page.goto(base + "login")
            page.fill("input[name=token]", anna)
            page.click("button[type=submit]")
            expect(page.locator("#operator")).to_have_text("anna")

            # Every order fails: fifty tasks in error, fifty open alerts.
            expect(page.locator('[data-state="error"]')).to_have_text(str(ORDERS), timeout=PATIENCE)
            expect(page.locator("#open-alerts")).to_have_text(str(ORDERS), timeout=PATIENCE)

            # The agent is corrected; then all fifty are retried in one action.
            (cli_dir / "fixed").touch()
            page.click("nav >> text=Errors")
            expect(page.locator("#count")).to_have_text(str(ORDERS))
            reason = page.locator("td.reason").first  # its first line; the whole in its title
            expect(reason).to_contain_text("gave up after 1 tries")
            expect(reason).to_have_attribute("title", re.compile("the carrier refuses"))
            page.check("#all-matching")
            page.click("button[name=action][value=retry]")
            expect(page.locator("h1")).to_have_text(f"Retry {ORDERS} tasks?")
            page.click("#confirm")
            expect(page.locator("#done")).to_contain_text(f"{ORDERS} ")
            expect(page.locator("#done")).to_contain_text("0 refused")

            # Each task ends processed, each alert resolves by itself: 0 open alerts.
            page.goto(base)
            expect(page.locator('[data-state="processed"]')).to_have_text(
                str(ORDERS), timeout=PATIENCE
            )
            expect(page.locator("#open-alerts")).to_have_text("0", timeout=PATIENCE)
            page.goto(base + "alerts?state=resolved")
            expect(page.locator("body")).to_contain_text("task processed")

            # A task's page: processed, its history names the bulk retry and who did it.
            page.goto(base + f"tasks/{task_ids[7]}")
            expect(page.locator("#state")).to_have_text("processed")
            expect(page.locator("table.history")).to_contain_text('"bulk"')
            expect(page.locator("table.history")).to_contain_text('"by": "anna"')
            page.close()

    alerts = _json(shepherd_cli, "alerts", "--state", "all", "--limit", "1000", env=env)
    records = alerts["alerts"] if isinstance(alerts, dict) else alerts
    ours = [a for a in records if a["task_id"] in set(task_ids)]
    assert len(ours) == ORDERS  # one alert per task, however often it failed
    assert {a["state"] for a in ours} == {"resolved"}
    assert {a["resolved_by"] for a in ours} == {"task processed"}
    tasks = _json(shepherd_cli, "tasks", "--state", "processed", "--limit", "1000", env=env)
    rows = tasks["tasks"] if isinstance(tasks, dict) else tasks
    assert {t["id"] for t in rows} >= set(task_ids)
