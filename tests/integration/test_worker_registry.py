"""The worker registry loop: a running App keeps its row, rides out outages, stops it at the end."""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import socket
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pytest

from shepherd import App
from shepherd.core.workers import Worker, WorkerState
from shepherd.errors import StoreDamagedError, StoreUnavailableError
from shepherd.registry import WorkerRegistry
from shepherd.store.ops import BeatWorker, RegisterWorker, StopWorker
from shepherd.store.roles import RegistryStore
from shepherd.store.watch import StoreWatch
from shepherd.testing import wait_until
from support.fake_store import ByOperation, Handlers


async def test_a_running_app_registers_and_marks_itself_stopped(app: App) -> None:
    @app.agent("pay")
    async def pay(request: object) -> None:
        return None

    store = app.store
    async with app.running(["scheduler", "agent"]):
        await wait_until(
            lambda: _registered(app), timeout=10, message="the process never registered"
        )
        (worker,) = await store.list_workers()
        assert (worker.instance, worker.host, worker.pid) == (
            app.instance,
            socket.gethostname(),
            os.getpid(),
        )
        assert (worker.roles, worker.agents) == (("scheduler", "agent"), ("pay",))
        ttl = app.settings.worker_ttl
        assert worker.state(now=store.now(), ttl=ttl) is WorkerState.ALIVE
        assert await store.dead_workers([app.instance], ttl=ttl) == set()

    async def stopped() -> bool:
        (row,) = await store.list_workers()
        return row.stopped_at is not None

    await wait_until(stopped, timeout=10, message="the row was never marked stopped")
    assert await store.dead_workers([app.instance], ttl=app.settings.worker_ttl) == {app.instance}


async def _registered(app: App) -> bool:
    return any(w.instance == app.instance for w in await app.store.list_workers())


# -- the loop against a store that misbehaves on cue ---------------------------
@dataclass
class FlakyStore(ByOperation, RegistryStore):
    """The registry's three operations, failing or answering as a test scripts them."""

    #: Outcomes of the next calls, in order: an exception to raise, or a beat's answer.
    script: list[object] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)
    stop_forever: bool = False
    done: asyncio.Event = field(default_factory=asyncio.Event)

    def now(self) -> datetime:
        return datetime.now(UTC)

    @functools.cached_property
    def watch(self) -> StoreWatch:
        return StoreWatch(self.now)

    def handlers(self) -> Handlers:
        return {RegisterWorker: self.register, BeatWorker: self.beat, StopWorker: self.stop}

    def _next(self, name: str) -> object:
        self.calls.append(name)
        if not self.script:
            self.done.set()
            return True
        outcome = self.script.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    async def register(self, op: RegisterWorker) -> Worker:
        self._next("register")
        now = datetime.now(UTC)
        return Worker(
            instance=op.instance,
            host=op.host,
            pid=op.pid,
            roles=tuple(op.roles),
            agents=tuple(op.agents),
            started_at=now,
            beat_at=now,
        )

    async def beat(self, op: BeatWorker) -> bool:
        return bool(self._next("beat"))

    async def stop(self, op: StopWorker) -> None:
        self.calls.append("stop")
        if self.stop_forever:
            await asyncio.Event().wait()


@pytest.fixture
def quick_app(tmp_path: Path) -> App:
    """An app that beats every 10 ms (never opened: its store is replaced)."""
    return App(f"sqlite:///{tmp_path}/unused.db", alerts=(), worker_beat=0.01, worker_ttl=1.0)


def _registry(app: App, store: FlakyStore) -> WorkerRegistry:
    """The app's registry loop for an agent process, on the scripted store."""
    return WorkerRegistry(
        store,
        instance=app.instance,
        roles=["agent"],
        agents=app.agents,
        settings=app.settings,
        clock=app.clock,
    )


async def test_the_registry_rides_out_an_outage_and_registers_again_if_its_row_is_gone(
    quick_app: App, caplog: pytest.LogCaptureFixture
) -> None:
    lost = StoreUnavailableError("the server is restarting")
    store = FlakyStore(script=[lost, lost, None, True, lost, False, None, True])
    registry = _registry(quick_app, store)
    caplog.set_level(logging.INFO, logger="shepherd.registry")

    job = asyncio.create_task(registry.run())
    await asyncio.wait_for(store.done.wait(), timeout=10)
    job.cancel()
    await asyncio.gather(job, return_exceptions=True)

    assert store.calls[:8] == [
        "register",  # lost
        "register",  # lost
        "register",
        "beat",
        "beat",  # lost
        "beat",  # False: the row is gone
        "register",
        "beat",
    ]
    assert store.calls[-1] == "stop"
    assert registry.outage.outages == 2
    assert registry.registrations == 2
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert sum("lost the store" in m for m in warnings) == 2  # once per outage, not per failure
    assert any("registering again" in m for m in warnings)


async def test_any_other_error_ends_the_loop_with_its_reason(quick_app: App) -> None:
    store = FlakyStore(script=[StoreDamagedError("the file is not a database")])
    registry = _registry(quick_app, store)

    with pytest.raises(StoreDamagedError, match="not a database"):
        await asyncio.wait_for(registry.run(), timeout=10)
    assert store.calls == ["register", "stop"]  # still marked stopped, best effort


async def test_stopping_never_waits_long_for_the_store(
    quick_app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("shepherd.registry.STOP_TIMEOUT", 0.05)
    store = FlakyStore(stop_forever=True)
    registry = _registry(quick_app, store)

    job = asyncio.create_task(registry.run())
    await asyncio.wait_for(store.done.wait(), timeout=10)
    job.cancel()
    done, _ = await asyncio.wait({job}, timeout=5)

    assert done, "stopping the registry hung on an unresponsive store"
    assert job.cancelled()
    assert store.calls[-1] == "stop"


async def test_a_registry_cancelled_before_its_first_write_stops_nothing(quick_app: App) -> None:
    store = FlakyStore()
    registry = _registry(quick_app, store)

    job = asyncio.create_task(registry.run())
    job.cancel()
    await asyncio.gather(job, return_exceptions=True)

    assert store.calls == []
