"""Threaded handlers: which handlers `threads=True` accepts, and the threads that run them."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
from datetime import UTC, datetime

import pytest

from shepherd import AgentRequest, App, ConfigError
from shepherd.agents.threads import HandlerThreads
from shepherd.core.records import JsonValue
from shepherd.testing import wait_until

PATIENCE = 10.0


@pytest.fixture
def app() -> App:
    return App("sqlite:///unused.db")  # nothing is opened: registration only


def a_request() -> AgentRequest:
    return AgentRequest(
        payload={"n": 1},
        idempotency_key="t/1",
        attempt=1,
        retry=0,
        complete_by=datetime(2030, 1, 1, tzinfo=UTC),
        task_id="t",
        seq=1,
        agent="legacy",
    )


# -- registration ----------------------------------------------------------------------
def test_an_async_handler_with_threads_is_refused_naming_the_agent(app: App) -> None:
    async def handler(request: AgentRequest) -> JsonValue:
        return None

    with pytest.raises(ConfigError, match=r"agent 'legacy'.*must be a plain `def`") as caught:
        app.agent("legacy", threads=True)(handler)
    assert caught.value.field == "threads"
    assert "legacy" not in app.agents


def test_a_plain_handler_without_threads_is_refused_naming_the_agent(app: App) -> None:
    def handler(request: AgentRequest) -> JsonValue:
        return None

    with pytest.raises(ConfigError, match=r"agent 'handler'.*pass threads=True"):
        app.agent()(handler)
    assert app.agents == {}


def test_a_lambda_returning_a_coroutine_is_refused_too(app: App) -> None:
    async def work(request: AgentRequest) -> JsonValue:
        return None

    with pytest.raises(ConfigError, match="not an `async def`"):
        app.agent("quick")(lambda request: work(request))


def test_async_callables_of_every_shape_are_accepted_without_threads(app: App) -> None:
    class Service:
        async def __call__(self, request: AgentRequest) -> JsonValue:
            return None

        async def handle(self, request: AgentRequest) -> JsonValue:
            return None

    async def handler(request: AgentRequest, *, extra: int) -> JsonValue:
        return extra

    app.agent("object")(Service())
    app.agent("method")(Service().handle)
    app.agent("partial")(functools.partial(handler, extra=1))

    assert {a.name: a.threads for a in app.agents.values()} == {
        "object": False,
        "method": False,
        "partial": False,
    }


def test_plain_callables_are_accepted_with_threads(app: App) -> None:
    class Client:
        def __call__(self, request: AgentRequest) -> JsonValue:
            return None

    def handler(request: AgentRequest) -> JsonValue:
        return None

    app.agent("function", threads=True)(handler)
    app.agent("object", threads=True)(Client())

    assert all(a.threads for a in app.agents.values())
    assert app.agents["function"].fn is handler


# -- the async helpers refuse a handler thread ------------------------------------------
@pytest.mark.parametrize("method", ["heartbeat", "once"])
def test_heartbeat_and_once_refuse_a_handler_thread(method: str) -> None:
    request = a_request()
    errors: list[BaseException] = []

    async def effect() -> JsonValue:
        return None

    def in_a_thread() -> None:
        try:
            if method == "heartbeat":
                request.heartbeat()
            else:
                request.once(effect)
        except RuntimeError as exc:
            errors.append(exc)

    thread = threading.Thread(target=in_a_thread)
    thread.start()
    thread.join(PATIENCE)

    (error,) = errors
    assert f"request.{method}() is async" in str(error)
    assert "threads=True agent cannot call it" in str(error)


# -- the threads --------------------------------------------------------------------------
async def test_a_handler_runs_in_a_daemon_thread_with_the_callers_context() -> None:
    threads = HandlerThreads()
    tag: contextvars.ContextVar[str] = contextvars.ContextVar("tag")
    tag.set("from the loop")
    seen: list[tuple[str, bool, str]] = []

    def handler(request: AgentRequest) -> JsonValue:
        current = threading.current_thread()
        seen.append((current.name, current.daemon, tag.get()))
        return request.payload

    assert await threads.start(handler, a_request()) == {"n": 1}
    (name, daemon, context) = seen[0]
    assert name.startswith("shepherd-handler-")
    assert name != threading.current_thread().name
    assert daemon
    assert context == "from the loop"
    threads.close()


async def test_a_handlers_exception_reaches_the_awaiting_side() -> None:
    threads = HandlerThreads()

    def handler(request: AgentRequest) -> JsonValue:
        raise LookupError("no such order")

    with pytest.raises(LookupError, match="no such order"):
        await threads.start(handler, a_request())
    threads.close()


async def test_an_idle_thread_is_reused_and_busy_ones_are_added() -> None:
    threads = HandlerThreads()
    release = threading.Event()
    names: list[str] = []

    def handler(request: AgentRequest) -> JsonValue:
        names.append(threading.current_thread().name)
        release.wait(PATIENCE)
        return None

    release.set()
    await threads.start(handler, a_request())
    await threads.start(handler, a_request())
    assert threads.statistics()["started"] == 1
    assert len(set(names)) == 1

    release.clear()
    held = [threads.start(handler, a_request()) for _ in range(3)]
    await wait_until(lambda: len(names) == 5, timeout=PATIENCE)
    assert threads.statistics() == {"threads": 3, "running": 3, "started": 3}
    release.set()
    await asyncio.gather(*held)
    threads.close()
    await wait_until(lambda: threads.statistics()["threads"] == 0, timeout=PATIENCE)


async def test_idle_threads_end_after_their_idle_timeout() -> None:
    threads = HandlerThreads(idle_timeout=0.01)

    def handler(request: AgentRequest) -> JsonValue:
        return None

    await asyncio.gather(*(threads.start(handler, a_request()) for _ in range(2)))

    await wait_until(lambda: threads.statistics()["threads"] == 0, timeout=PATIENCE)
    assert threads.statistics()["started"] >= 1
