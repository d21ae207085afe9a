"""The metrics how-to: its example runs, its table names every metric a scrape has, its
commands print what it quotes, and the Grafana dashboard queries only those metrics.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from doctools import DOCS, Command, Session, code_blocks, session_steps
from prometheus_client.parser import text_string_to_metric_families

from shepherd import App, BreakerPolicy
from shepherd.exposition import metrics_text

PAGE = DOCS / "howto" / "metrics.md"
EXAMPLE = DOCS / "howto" / "metrics_scrape.py"
DASHBOARD = DOCS / "grafana" / "shepherd.json"
#: A row of the page's table: `name` | type | labels | meaning.
ROW = re.compile(r"^\| `(?P<name>shepherd_\w+)` \| (?P<type>[a-z ]+) \|(?P<labels>[^|]*)\|", re.M)
#: What a scrape's family types are called in the table.
TYPES = {"counter": "counter", "histogram": "histogram", "gauge": "store gauge"}


def table() -> dict[str, tuple[str, set[str]]]:
    """The page's metrics: name -> (type, labels)."""
    return {
        row["name"]: (row["type"], set(re.findall(r"`(\w+)`", row["labels"])))
        for row in ROW.finditer(PAGE.read_text())
    }


def shown_name(name: str, kind: str) -> str:
    """A family's name as the page (and a query) writes it: counters end in `_total`."""
    return f"{name}_total" if kind == "counter" else name


async def test_the_table_names_every_metric_of_a_scrape_with_its_type_and_labels(
    tmp_path: Path,
) -> None:
    app = App(f"sqlite:///{tmp_path}/s.db", alerts=())

    @app.agent("quote")
    async def quote(request: object) -> int:
        return 1

    await app.open()
    await app.store.breaker_report("quotes", BreakerPolicy(), failed=True)
    try:
        text = (await metrics_text(app)).decode()
    finally:
        await app.close()
    # prometheus-client writes a `_created` gauge beside each counter and histogram.
    families = [f for f in text_string_to_metric_families(text) if not f.name.endswith("_created")]

    scraped = {shown_name(f.name, f.type): TYPES[f.type] for f in families}
    assert {name: kind for name, (kind, _) in table().items()} == scraped
    for family in families:
        _, labels = table()[shown_name(family.name, family.type)]
        for sample in family.samples:
            assert set(sample.labels) - {"le"} == labels, (family.name, sample.labels)
    # Labels of the process's own metrics, counted or not yet.
    for metric in app.metrics.registry.collect():
        name = shown_name(metric.name, metric.type)
        if name in table():
            assert all(set(s.labels) - {"le"} == table()[name][1] for s in metric.samples)


def test_the_page_shows_the_whole_example() -> None:
    assert [b.text for b in code_blocks(PAGE.read_text(), "python")] == [EXAMPLE.read_text()]


@pytest.mark.slow
def test_the_example_prints_what_the_page_shows(session: Session) -> None:
    shutil.copy(EXAMPLE, session.cwd)
    (step,) = [
        s for s in session_steps(PAGE.read_text()) if isinstance(s, Command) and "python" in s.line
    ]
    session.play([step])


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_the_commands_print_the_lines_the_page_quotes(tmp_path: Path) -> None:
    text = PAGE.read_text()
    (run,) = [s for s in session_steps(text) if isinstance(s, Command) and "run" in s.line]
    shown = re.escape(run.expected).replace("9464", r"(\d+)")
    shown = re.sub(r"instance=\S+", r"instance=\\S+", shown)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        # The page's command on a port that is taken: the error the page quotes.
        failed = _shepherd(tmp_path, shlex.split(run.line.replace("9464", port))[1:])
    quoted = re.search(r"`(error: invalid setting[^`]*)`", " ".join(text.split()))
    assert quoted is not None
    assert failed.returncode == 2
    assert failed.stderr.strip() == quoted[1].replace("9464", port)
    # The page's command on a free port: the ready line the page shows.
    words = shlex.split(run.line.replace("9464", "0"))[1:]
    process = subprocess.Popen(
        [sys.executable, "-m", "shepherd", *words],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        ready = process.stdout.readline().strip()
    finally:
        process.kill()
        process.wait(30)
        if process.stdout is not None:
            process.stdout.close()
    assert re.fullmatch(shown, ready), ready


def test_the_grafana_dashboard_queries_only_documented_metrics() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    documented = table()
    queried: set[str] = set()
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            assert target["datasource"]["uid"] == "${DS_PROMETHEUS}"
            for name in re.findall(r"\bshepherd_\w+", target["expr"]):
                base = re.sub(r"_(bucket|count|sum)$", "", name)
                assert name in documented or documented.get(base, ("",))[0] == "histogram", name
                queried.add(base if base in documented else name)
    assert [i["name"] for i in dashboard["__inputs"]] == ["DS_PROMETHEUS"]
    # Every metric is on the dashboard, except the rare thread overdue count.
    assert set(documented) - queried == {"shepherd_agent_threads_overdue_total"}


def _shepherd(cwd: Path, words: list[str]) -> subprocess.CompletedProcess[str]:
    (cwd / "shop.py").write_text(SHOP)
    return subprocess.run(
        [sys.executable, "-m", "shepherd", *words],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


#: The `shop:app` of the page's commands: one workflow, one agent.
SHOP = """
from shepherd import App

app = App(alerts=())


@app.agent("prices.quote")
async def quote(request):
    return 12


@app.workflow("orders.quote")
async def order(ctx, data):
    return await ctx.call("prices.quote", data)
"""
