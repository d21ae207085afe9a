"""The tracing how-to: its examples are the files the session runs, every command prints
what the page shows, and its table names every span and attribute a trace has.
"""

from __future__ import annotations

import asyncio
import re
import shutil
from pathlib import Path

import pytest
from doctools import DOCS, Command, Session, code_blocks, session_steps
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from shepherd import App, Submission, WorkflowContext, tracing

PAGE = DOCS / "howto" / "tracing.md"
EXAMPLES = [DOCS / "howto" / "tracing_app.py", DOCS / "howto" / "tracing_tree.py"]
#: A row of the page's table of spans: `name` | made by | parent | attributes.
ROW = re.compile(
    r"^\| `(?P<name>shepherd\.\w+)[^`]*` \|[^|]*\|[^|]*\|(?P<attributes>[^|]*)\|", re.M
)


async def traced_attributes(store_url: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, set[str]]:
    """Every attribute the spans of a submit, a submit of many and their tasks set, by span."""
    provider = TracerProvider()
    kept = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(kept))
    monkeypatch.setattr(tracing, "_TRACER", provider.get_tracer("shepherd"))
    app = App(store_url, alerts=())

    @app.agent("a")
    async def a(request: object) -> int:
        return 1

    @app.workflow("w")
    async def w(ctx: WorkflowContext, data: object) -> object:
        return await ctx.call("a", data)

    async with app.running():
        ids = [await app.submit("w", 1)]
        ids += await app.submit_many([Submission("w", 2), Submission("w", 3)])
        for task_id in ids:
            await app.result(task_id, timeout=30)
        deadline = asyncio.get_running_loop().time() + 30
        while len([s for s in kept.get_finished_spans() if s.name == "shepherd.task w"]) < 3:
            assert asyncio.get_running_loop().time() < deadline, "the task runs' spans did not end"
            await asyncio.sleep(0.01)
    provider.shutdown()
    found: dict[str, set[str]] = {}
    for span in kept.get_finished_spans():
        found.setdefault(span.name.split()[0], set()).update(span.attributes or {})
    return found


def test_the_page_shows_the_whole_examples() -> None:
    blocks = [block.text for block in code_blocks(PAGE.read_text(), "python")]
    assert blocks == [example.read_text() for example in EXAMPLES]


async def test_the_table_names_every_span_and_its_attributes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = {
        row["name"]: set(re.findall(r"`(shepherd\.\w+)`", row["attributes"]))
        for row in ROW.finditer(PAGE.read_text())
    }
    assert rows == await traced_attributes(f"sqlite:///{tmp_path}/s.db", monkeypatch)


@pytest.mark.slow
def test_every_command_prints_what_the_page_shows(session: Session) -> None:
    for example in EXAMPLES:
        shutil.copy(example, session.cwd)
    steps = session_steps(PAGE.read_text())
    assert [type(step) for step in steps] == [Command] * 3
    session.play(steps)
