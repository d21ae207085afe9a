"""The dashboard in a real browser: Debian's Chromium driven by Playwright.

A real `shepherd run` works the store (one SQLite file) and a real
`shepherd dashboard --token` serves it. An operator logs in with a named
token, finds the task in `error`, opens it, finds the retry form filled with
the failed step's payload, retries it from its failed step with a corrected
payload and watches it become `processed` without reloading; the history
names them and keeps the payload replaced. Also: a request without the token
and an action without the CSRF token are refused, and a `<script>` payload is
text.

Screenshots of the overview and the task page go to the test's directory, and
to docs/images/ when SHEPHERD_DOCS_SCREENSHOTS=1 (how the docs' are made).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Dialog, Page, expect, sync_playwright

from e2e.conftest import CliProcess

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

Cli = Callable[..., subprocess.CompletedProcess[str]]
Start = Callable[..., AbstractContextManager[CliProcess]]

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SHARED = "shared-token-for-the-browser-test"
SCRIPT = "<script>alert(1)</script>"
DOCS_IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"
#: Read at import: the tests' fixtures clear SHEPHERD_* variables from the environment.
TO_DOCS = os.environ.get("SHEPHERD_DOCS_SCREENSHOTS") == "1"
#: Milliseconds the browser waits for what the page should come to show (a backstop).
PATIENCE = 20_000

#: The app: `ship` wants an address (without one it gives up, and the task
#: ends in `error`); `confirm` answers once the test opens its gate (a file).
DASH_APP = """
import asyncio
import os

from shepherd import App, RetryPolicy, TransientError

app = App(alerts=(), supervisor_interval=0.2, poll_interval=0.05)


@app.agent("ship", retry=RetryPolicy(max_attempts=2, initial_delay=0.01, max_delay=0.01))
async def ship(request):
    if "address" not in request.payload:
        raise TransientError("the carrier wants an address")
    return {"shipped_to": request.payload["address"], "gate": request.payload.get("gate")}


@app.agent("confirm")
async def confirm(request):
    gate = request.payload.get("gate")
    while gate and not os.path.exists(gate):  # the remote service answers when the test says
        await asyncio.sleep(0.02)
    return {"confirmed": request.payload["shipped_to"]}


@app.workflow("deliver", max_failures=1)
async def deliver(ctx, data):
    shipped = await ctx.call("ship", data, within=0.5)
    return await ctx.call("confirm", shipped, within=60)
"""


@pytest.fixture
def browser() -> Iterator[Browser]:
    """Debian's Chromium, headless (Playwright cannot download its own browser here)."""
    assert Path(CHROMIUM).exists(), f"{CHROMIUM} is missing: run scripts/install"
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


def _status(url: str, *, method: str = "GET", data: bytes | None = None) -> int:
    """The HTTP status of a request without any credential (redirects not followed)."""

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any) -> None:
            return None

    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(urllib.request.Request(url, data=data, method=method), timeout=10) as r:
            return int(r.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def _shot(page: Page, directory: Path, name: str) -> None:
    path = directory / name
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 1000
    if TO_DOCS:
        DOCS_IMAGES.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, DOCS_IMAGES / name)


def test_an_operator_retries_a_failed_task_from_the_browser(
    browser: Browser,
    shepherd_cli: Cli,
    shepherd_process: Start,
    cli_dir: Path,
    cli_env: dict[str, str],
) -> None:
    (cli_dir / "dashapp.py").write_text(DASH_APP)
    gate = cli_dir / "gate"
    env = {**cli_env, "SHEPHERD_APP": "dashapp:app"}
    with shepherd_process("run", env=env):
        added = shepherd_cli("tokens", "add", "anna", env=env)
        assert added.returncode == 0, added.stderr
        anna = added.stdout.splitlines()[0].rsplit(" ", 1)[1]
        submitted = shepherd_cli(
            "submit", "deliver", f'{{"item": "{SCRIPT}"}}', "--key", "order-17", env=env
        )
        assert submitted.returncode == 0, submitted.stderr
        task_id = submitted.stdout.strip().split()[-1]
        with shepherd_process(
            "dashboard", "--port", "0", env={**env, "SHEPHERD_DASHBOARD_TOKEN": SHARED}
        ) as dashboard:
            base = dashboard.ready_line.split("dashboard=", 1)[1].split()[0]

            # Without the token: pages send to the login form, the rest is refused.
            assert _status(base) == 303
            assert _status(base + "live/overview") == 401
            assert _status(base + f"tasks/{task_id}/cancel", method="POST", data=b"") == 401

            page = browser.new_page()
            dialogs: list[str] = []

            def on_dialog(dialog: Dialog) -> None:  # an alert() that ran would land here
                dialogs.append(dialog.message)
                dialog.dismiss()

            page.on("dialog", on_dialog)
            page.goto(base)
            expect(page).to_have_url(f"{base}login?next=%2F")
            page.fill("input[name=token]", anna)
            page.click("button[type=submit]")
            expect(page.locator("#operator")).to_have_text("anna")

            # The overview counts the task in error once the supervisor gave up on it.
            expect(page.locator('[data-state="error"]')).to_have_text("1", timeout=PATIENCE)
            _shot(page, cli_dir, "dashboard-overview.png")

            page.click("nav >> text=Errors")
            page.click(f'a[href="/tasks/{task_id}"]')
            expect(page.locator("#state")).to_have_text("error")
            expect(page.get_by_text(SCRIPT).first).to_be_visible()  # shown as text
            assert dialogs == []

            # An action without its CSRF token is refused (403), and changes nothing.
            status = page.evaluate(
                """async (path) => (await fetch(path, {method: "POST",
                    headers: {"Content-Type": "application/x-www-form-urlencoded"},
                    body: "seq=1"})).status""",
                f"/tasks/{task_id}/retry",
            )
            assert status == 403

            # The failure and the retry form come first: the failed step chosen, its payload
            # in the box; choosing another step puts that step's payload there (none here).
            expect(page.locator("#reason")).to_contain_text("ship")
            box = page.locator("textarea[name=payload]")
            expect(page.locator("select[name=seq]")).to_have_value("1")
            expect(box).to_have_value(json.dumps({"item": SCRIPT}, indent=2))
            page.select_option("select[name=seq]", "")
            expect(box).to_have_value("")
            page.select_option("select[name=seq]", "1")
            expect(box).to_have_value(json.dumps({"item": SCRIPT}, indent=2))
            expect(page.locator("#undo")).to_contain_text("Nothing needs undoing")
            expect(page.locator("#cancel button.danger")).to_be_visible()

            # Retry from the failed step, first with broken JSON, then corrected.
            page.select_option("select[name=seq]", "1")
            page.fill("textarea[name=payload]", '{"address": ')
            page.click("#retry button[type=submit]")
            expect(page.locator("#problem")).to_contain_text("malformed JSON")
            expect(page.locator("#state")).to_have_text("error")
            corrected = f'{{"item": "book", "address": "1 Main St", "gate": "{gate}"}}'
            page.select_option("select[name=seq]", "1")
            page.fill("textarea[name=payload]", corrected)
            page.click("#retry button[type=submit]")
            expect(page.locator("#step-2")).to_be_visible(timeout=PATIENCE)  # `confirm` waits
            expect(page.locator("#state")).not_to_have_text("processed")
            page.evaluate("window.notReloaded = true")
            gate.touch()
            expect(page.locator("#state")).to_have_text("processed", timeout=PATIENCE)
            assert page.evaluate("window.notReloaded") is True  # the same document: no reload
            expect(page.locator(".by").first).to_have_text("anna")
            expect(page.locator("table.history")).to_contain_text('"by": "anna"')
            # The history keeps the payload the retry replaced.
            expect(page.locator("table.history .replaced")).to_contain_text(SCRIPT)
            _shot(page, cli_dir, "dashboard-task.png")
            assert dialogs == []
            page.close()

    shown = shepherd_cli("show", task_id, "--json", env=env)
    assert '"processed"' in shown.stdout
