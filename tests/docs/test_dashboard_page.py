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

from shepherd.cli.commands import cli
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


def test_off_loopback_without_a_token_it_refuses_as_the_page_quotes(tmp_path: Path) -> None:
    (quoted,) = [
        line
        for block in code_blocks(PAGE.read_text(), "console")
        for line in block.text.splitlines()
        if line.startswith("error: ")
    ]
    store = f"sqlite:///{tmp_path}/s.db"
    result = subprocess.run(
        [sys.executable, "-m", "shepherd", "dashboard", "--store", store, "--host", "0.0.0.0"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (result.returncode, result.stderr.strip()) == (2, quoted)


async def test_the_example_serves_the_dashboard_behind_its_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SHEPHERD_DASHBOARD_TOKEN", "a-token")
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
            bearer = {"Authorization": "Bearer a-token"}
            assert (await http.get("/tasks", headers=bearer)).status_code == 200
    finally:
        await module.app.close()
    monkeypatch.setenv("DASHBOARD_HOST", "0.0.0.0")
    monkeypatch.delenv("SHEPHERD_DASHBOARD_TOKEN")
    with pytest.raises(ConfigError, match="give it a token"):
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
