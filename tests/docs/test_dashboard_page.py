"""The dashboard how-to: its example is the file it shows and serves what it says, its
commands have the options it shows and print what it quotes, its screenshots exist.
"""

from __future__ import annotations

import importlib.util
import re
import shlex
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from doctools import DOCS, code_blocks

from shepherd import App
from shepherd.cli.commands import cli
from shepherd.dashboard import Reach, create_dashboard
from shepherd.errors import ConfigError

PAGE = DOCS / "howto" / "dashboard.md"
EXAMPLE = DOCS / "howto" / "dashboard_site.py"


def test_the_page_shows_the_whole_example() -> None:
    assert [b.text for b in code_blocks(PAGE.read_text(), "python")] == [EXAMPLE.read_text()]


def test_its_screenshots_exist() -> None:
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", PAGE.read_text())
    assert len(images) == 2
    for image in images:
        path = (PAGE.parent / image).resolve()
        assert path.stat().st_size > 10_000, path


def test_every_command_shown_takes_the_options_shown() -> None:
    for block in code_blocks(PAGE.read_text(), "console"):
        for line in block.text.splitlines():
            if not line.startswith("$ ") or " shepherd " not in f" {line} ":
                continue
            words = shlex.split(line[2:].split("shepherd ", 1)[1])
            command = cli.get_command(None, words[0])  # type: ignore[arg-type]
            assert command is not None, line
            options = {o for p in command.params for o in p.opts}
            if words[0] == "tokens":
                continue  # a group: its reference is docs/reference/cli.md
            assert {w for w in words if w.startswith("--")} <= options, line


def test_each_refusal_it_quotes_is_what_its_command_prints(tmp_path: Path) -> None:
    refusals = []
    for block in code_blocks(PAGE.read_text(), "console"):
        lines = block.text.splitlines()
        refusals += [
            (lines[n - 1], line) for n, line in enumerate(lines) if line.startswith("error: ")
        ]
    assert len(refusals) == 2
    store = f"sqlite:///{tmp_path}/s.db"
    for command, quoted in refusals:
        words = shlex.split(command[2:].split("shepherd ", 1)[1])
        words[words.index("--app") : words.index("--app") + 2] = ["--store", store]
        result = subprocess.run(
            [sys.executable, "-m", "shepherd", *words],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert (result.returncode, result.stderr.strip()) == (2, quoted), command


async def test_behind_the_proxy_it_shows_a_browser_logs_in_and_gets_a_secure_cookie(
    tmp_path: Path,
) -> None:
    """The nginx block's headers, sent from the proxy's address to the dashboard its command starts."""
    (nginx,) = code_blocks(PAGE.read_text(), "nginx")
    sent = dict(re.findall(r"proxy_set_header (\S+) (\S+);", nginx.text))
    upstream = re.search(r"proxy_pass http://(\S+);", nginx.text)
    assert upstream is not None
    values = {"$scheme": "https", "$proxy_add_x_forwarded_for": "203.0.113.9"}
    headers = {name: values[value] for name, value in sent.items()}
    (command,) = [
        line
        for block in code_blocks(PAGE.read_text(), "console")
        for line in block.text.splitlines()
        if "--public-url" in line
    ]
    words = shlex.split(command.split("shepherd ", 1)[1])
    public_url = words[words.index("--public-url") + 1]
    proxies = words[words.index("--forwarded-allow-ips") + 1].split(",")
    app = App(f"sqlite:///{tmp_path}/s.db", alerts=())
    token = "a-token-of-sixteen-or-more"
    reach = Reach.of(host="127.0.0.1", public_url=public_url, forwarded_allow_ips=proxies)
    site = create_dashboard(app, token=token, reach=reach)
    await app.open()
    try:
        # nginx's default Host is $proxy_host: the upstream's address.
        transport = httpx.ASGITransport(app=site, client=(proxies[0], 50_000))
        base = f"http://{upstream[1]}"
        async with httpx.AsyncClient(transport=transport, base_url=base) as http:
            browser = {**headers, "Origin": public_url}
            logged = await http.post("/login", data={"token": token}, headers=browser)
            assert logged.status_code == 303
            assert "; secure" in logged.headers["set-cookie"].lower()
            foreign = {**headers, "Origin": "https://evil.example"}
            assert (
                await http.post("/login", data={"token": token}, headers=foreign)
            ).status_code == 403
    finally:
        await app.close()


async def test_the_example_serves_the_dashboard_behind_its_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SHEPHERD_DASHBOARD_TOKEN", "a-token-of-sixteen-or-more")
    spec = importlib.util.spec_from_file_location("dashboard_site", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    await module.app.open()
    try:
        transport = httpx.ASGITransport(app=module.site)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            assert (await http.get("/tasks")).status_code == 303
            bearer = {"Authorization": "Bearer a-token-of-sixteen-or-more"}
            assert (await http.get("/tasks", headers=bearer)).status_code == 200
    finally:
        await module.app.close()
    monkeypatch.setenv("DASHBOARD_PUBLIC_URL", "https://ops.example.com")
    public = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(public)
    await public.app.open()
    try:
        transport = httpx.ASGITransport(app=public.site)
        for host, status in (("ops.example.com", 200), ("evil.example", 400)):
            async with httpx.AsyncClient(transport=transport, base_url=f"http://{host}") as http:
                assert (await http.get("/tasks", headers=bearer)).status_code == status, host
    finally:
        await public.app.close()
    monkeypatch.delenv("DASHBOARD_PUBLIC_URL")
    monkeypatch.setenv("DASHBOARD_HOST", "0.0.0.0")
    monkeypatch.delenv("SHEPHERD_DASHBOARD_TOKEN")
    with pytest.raises(ConfigError, match="give it a token"):
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
