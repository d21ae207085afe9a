"""Moving the FakeClock of an App that runs on it (the integration tests marked `fake_time`).

While the clock stands still only work that needs no time happens: a submit,
a claim, a step sent to its agent, a reply. A test waits for that work with
the clock still (`wait_until`, `app.result`) and moves the clock only to reach
what time brings: a step's deadline, the supervisor's next scan, a beat, a
backoff. `pass_until` moves it one wake-up at a time, never more than STEP
fake seconds at once, and stops as soon as its outcome shows.

The clock moves only while no call of the app's store is under way: a write
that takes long in real time (a loaded machine, a PostgreSQL commit) takes no
fake time, as on a clock that moves only when nothing else can happen (trio's
autojump). Otherwise a beat written over two moves would look, to the
process itself, like a freeze that forgives the claims expiring meanwhile,
and a step could pass its window while its request is being written. Work
outside the store (a handler's HTTP call, a thread) is not waited for: a step
window of WINDOW is many moves long, so that no move passes it first.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
from typing import TYPE_CHECKING, Any, final

from shepherd.core.states import TERMINAL_STATES
from shepherd.testing import FakeClock, advance_until

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from shepherd import App
    from shepherd.core.records import Task

#: The periods of an app on a FakeClock: a fake second each, as the defaults of
#: `worker_beat` and `breaker_refresh` are (moving the clock costs no wall time).
PERIODS: dict[str, float] = {"supervisor_interval": 1.0, "poll_interval": 1.0, "lease_ttl": 3.0}
#: The most fake seconds one move of the clock goes on: about one of PERIODS.
STEP = 1.0
#: A step window on fake time: many moves long (see the module's docstring).
WINDOW = 10.0
#: Real seconds a test waits for an outcome before it fails (a backstop).
PATIENCE = 15.0
#: Real seconds the event loop runs between two moves, for what the last one woke.
INTERVAL = 0.01
#: Real seconds a move waits at most for the store's calls to end (a backstop:
#: a call that waits for the clock itself must not hold it still).
QUIET = 2.0


def clock_of(app: App) -> FakeClock:
    """The FakeClock `app` runs on."""
    assert isinstance(app.clock, FakeClock), "the test is not marked fake_time"
    return app.clock


@final
class StoreCalls:
    """The calls of one store under way, counted by wrapping its methods in place.

    Every public coroutine method of the store's class (each operation of the
    store contract is one) is replaced, on the instance, by one that counts the
    call until it returns. A test's wrapper around the store (one that keeps it as `_store`)
    is looked through: the store inside is the one counted.
    """

    def __init__(self, store: Any) -> None:
        self.under_way = 0
        self._quiet = asyncio.Event()
        self._quiet.set()
        for name in dir(type(store)):
            method = inspect.getattr_static(store, name)
            if not name.startswith("_") and inspect.iscoroutinefunction(method):
                setattr(store, name, self._counted(getattr(store, name)))

    def _counted(self, method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        @functools.wraps(method)
        async def call(*args: Any, **kwargs: Any) -> Any:
            self.under_way += 1
            self._quiet.clear()
            try:
                return await method(*args, **kwargs)
            finally:
                self.under_way -= 1
                if not self.under_way:
                    self._quiet.set()

        return call

    async def wait_quiet(self) -> None:
        """Return once no call is under way (or QUIET real seconds have passed)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._quiet.wait(), QUIET)


def store_calls(app: App) -> StoreCalls:
    """The counter of the calls of `app`'s store (installed at the first look)."""
    store: Any = app.store
    while hasattr(store, "_store"):
        store = store._store
    calls = store.__dict__.get("_fake_time_calls")
    if calls is None:
        calls = store._fake_time_calls = StoreCalls(store)
    return calls


async def pass_until(
    app: App, predicate: Callable[[], Awaitable[bool] | bool], *, message: str = ""
) -> None:
    """Move the app's clock on, one wake-up at a time, until `predicate` holds.

    As `shepherd.testing.advance_until`, but each move waits until no call of
    the app's store is under way (see the module's docstring).

    Raises:
        AssertionError: The predicate was still false after PATIENCE real seconds.
    """
    await advance_until(
        clock_of(app),
        predicate,
        step=STEP,
        timeout=PATIENCE,
        interval=INTERVAL,
        message=message,
        before_move=store_calls(app).wait_quiet,
    )


def task_is(app: App, task_id: str, check: Callable[[Task], bool]) -> Callable[[], Awaitable[bool]]:
    """A predicate over the stored task."""

    async def predicate() -> bool:
        return check(await app.get_task(task_id))

    return predicate


async def kinds(app: App, task_id: str) -> list[str]:
    """The kinds of the task's events, in order."""
    return [e.kind for e in await app.history(task_id)]


def has_event(app: App, task_id: str, kind: str) -> Callable[[], Awaitable[bool]]:
    """A predicate: the task's history has an event of `kind`."""

    async def predicate() -> bool:
        return kind in await kinds(app, task_id)

    return predicate


async def ended(app: App, task_id: str) -> Task:
    """Move the app's clock until the task has ended (or is in `error`); the task with its steps."""
    await pass_until(
        app,
        task_is(app, task_id, lambda t: t.process_state in TERMINAL_STATES),
        message=f"task {task_id} did not end",
    )
    return await app.get_task(task_id)
