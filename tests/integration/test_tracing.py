"""Spans of a task and its steps in one process (`shepherd.tracing`), on both backends.

The tests give shepherd's tracer a provider of their own with an in-memory
exporter, instead of setting the process's global provider: every other test of
the session keeps the API's default (nothing recorded), which the last test
checks stores no context.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from shepherd import (
    App,
    PermanentError,
    ProcessState,
    Submission,
    TaskFailedError,
    WorkflowContext,
    tracing,
)
from shepherd.core.records import JsonValue
from support.spans import Span, as_dicts, chain, named, span_id

PATIENCE = 15.0


@pytest.fixture
def exporter(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """Every span shepherd ends from now on, kept in memory."""
    provider = TracerProvider()
    kept = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(kept))
    monkeypatch.setattr(tracing, "_TRACER", provider.get_tracer("shepherd"))
    yield kept
    provider.shutdown()


def _checkout(app: App) -> None:
    @app.agent("payments.charge")
    async def charge(request: Any) -> JsonValue:
        if request.payload.get("decline"):
            raise PermanentError("card declined")
        return {"charged": request.payload["order"]}

    @app.agent("email.send")
    async def send(request: Any) -> JsonValue:
        return "sent"

    @app.workflow("checkout")
    async def checkout(ctx: WorkflowContext, order: Any) -> JsonValue:
        charged = await ctx.call("payments.charge", order)
        await ctx.call("email.send", order)
        return charged


async def _runs_ended(exporter: InMemorySpanExporter, count: int) -> None:
    """Poll until `count` task runs' spans ended (a run's span ends just after its task)."""
    deadline = asyncio.get_running_loop().time() + PATIENCE
    while len(named(as_dicts(exporter.get_finished_spans()), "shepherd.task ")) < count:
        assert asyncio.get_running_loop().time() < deadline, "the task runs' spans did not end"
        await asyncio.sleep(0.01)


def _spans(exporter: InMemorySpanExporter) -> tuple[list[Span], dict[str, Span]]:
    spans = as_dicts(exporter.get_finished_spans())
    return spans, {span_id(s): s for s in spans}


async def test_every_step_span_is_a_child_of_its_task_run_and_of_the_submit(
    app: App, exporter: InMemorySpanExporter
) -> None:
    _checkout(app)

    async with app.running():
        task_id = await app.submit("checkout", {"order": 7})
        assert await app.result(task_id, timeout=PATIENCE) == {"charged": 7}
        await _runs_ended(exporter, 1)
    stored = await app.get_task(task_id)

    spans, by_id = _spans(exporter)
    (submit,) = named(spans, "shepherd.submit")
    (run,) = named(spans, "shepherd.task checkout")
    steps = named(spans, "shepherd.step ")
    assert submit["attributes"] == {
        "shepherd.tasks": 1,
        "shepherd.workflow": "checkout",
        "shepherd.task_id": task_id,
    }
    assert stored.trace is not None
    assert submit["context"]["trace_id"][2:] in stored.trace
    assert run["parent_id"] == span_id(submit)
    assert run["attributes"]["shepherd.task_id"] == task_id
    assert run["attributes"]["shepherd.process_state"] == str(ProcessState.PROCESSED)
    assert sorted(s["name"] for s in steps) == [
        "shepherd.step email.send",
        "shepherd.step payments.charge",
    ]
    for step in steps:
        assert [s["name"] for s in chain(step, by_id)] == [
            step["name"],
            "shepherd.task checkout",
            "shepherd.submit",
        ]
        attributes = step["attributes"]
        assert attributes["shepherd.task_id"] == task_id
        assert attributes["shepherd.workflow"] == "checkout"
        assert attributes["shepherd.attempt"] == 1
        assert attributes["shepherd.seq"] == (1 if "payments" in step["name"] else 2)
        assert step["status"]["status_code"] == "UNSET"
    # Each reply, as its scheduler recorded it, continues the step that answered.
    replies = named(spans, "shepherd.reply")
    assert sorted(r["parent_id"] for r in replies) == sorted(span_id(s) for s in steps)
    assert {s["context"]["trace_id"] for s in spans} == {submit["context"]["trace_id"]}


async def test_a_failed_step_and_its_task_say_so_on_their_spans(
    app: App, exporter: InMemorySpanExporter
) -> None:
    _checkout(app)

    async with app.running():
        task_id = await app.submit("checkout", {"order": 8, "decline": True})
        with pytest.raises(TaskFailedError):
            await app.result(task_id, timeout=PATIENCE)
        await _runs_ended(exporter, 1)
    assert (await app.get_task(task_id)).process_state is ProcessState.COMPENSATED

    spans, _ = _spans(exporter)
    (step,) = named(spans, "shepherd.step ")
    assert step["status"] == {
        "status_code": "ERROR",
        "description": "PermanentError: card declined",
    }
    assert [e["name"] for e in step["events"]] == ["exception"]
    (run,) = named(spans, "shepherd.task checkout")
    assert run["status"]["status_code"] == "ERROR"
    assert run["attributes"]["shepherd.process_state"] == "compensated"


async def test_a_submit_inside_a_span_of_the_caller_continues_it(
    app: App, exporter: InMemorySpanExporter
) -> None:
    _checkout(app)
    caller = tracing._TRACER  # the provider the fixture gave shepherd

    async with app.running():
        with caller.start_as_current_span("checkout request") as request:
            ids = await app.submit_many([])  # nothing to submit: no span
            task_id = await app.submit("checkout", {"order": 9})
        await app.result(task_id, timeout=PATIENCE)
        await _runs_ended(exporter, 1)

    assert ids == []
    spans, by_id = _spans(exporter)
    (step, _) = named(spans, "shepherd.step ")
    top = chain(step, by_id)[-1]
    assert top["name"] == "checkout request"
    assert top["context"]["span_id"] == f"0x{request.get_span_context().span_id:016x}"


async def test_submit_many_is_one_span_every_task_continues(
    app: App, exporter: InMemorySpanExporter
) -> None:
    _checkout(app)

    async with app.running():
        ids = await app.submit_many([Submission("checkout", {"order": n}) for n in range(3)])
        for task_id in ids:
            await app.result(task_id, timeout=PATIENCE)
        await _runs_ended(exporter, 3)

    spans, by_id = _spans(exporter)
    (submit,) = named(spans, "shepherd.submit")
    assert submit["attributes"]["shepherd.task_ids"] == ids
    runs = named(spans, "shepherd.task ")
    assert sorted(r["attributes"]["shepherd.task_id"] for r in runs) == sorted(ids)
    for step in named(spans, "shepherd.step "):
        assert chain(step, by_id)[-1] is submit


async def test_without_a_provider_nothing_is_recorded_or_stored(app: App) -> None:
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider), (
        "a test set the process's tracer provider"
    )
    _checkout(app)

    async with app.running():
        task_id = await app.submit("checkout", {"order": 1})
        await app.result(task_id, timeout=PATIENCE)

    assert (await app.get_task(task_id)).trace is None


WITHOUT_OPENTELEMETRY = """
import asyncio
import sys

sys.modules["opentelemetry"] = None  # as if not installed: importing it fails

from shepherd import App, tracing

app = App(sys.argv[1], alerts=())


@app.agent("double")
async def double(request):
    return request.payload * 2


@app.workflow("twice")
async def twice(ctx, n):
    return await ctx.call("double", await ctx.call("double", n))


async def main():
    async with app.running():
        task_id = await app.submit("twice", 3)
        result = await app.result(task_id, timeout=30)
    task = await app.get_task(task_id)
    print(tracing.ENABLED, result, task.trace, "opentelemetry.trace" in sys.modules)


asyncio.run(main())
"""


def test_without_opentelemetry_shepherd_runs_as_before(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_OPENTELEMETRY, f"sqlite:///{tmp_path}/s.db"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "12", "None", "False"]
