"""Moving the FakeClock of an App that runs on it (the integration tests marked `fake_time`).

While the clock stands still only work that needs no time happens: a submit,
a claim, a step sent to its agent, a reply. A test waits for that work with
the clock still (`wait_until`, `app.result`) and moves the clock only to reach
what time brings: a step's deadline, the supervisor's next scan, a beat, a
backoff. `pass_until` moves it one wake-up at a time, never more than STEP
fake seconds at once, and stops as soon as its outcome shows. A step window of
WINDOW is many moves long, so that no move passes a window before the work
that needs no time (a claim, a step reaching its agent) has run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

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


def clock_of(app: App) -> FakeClock:
    """The FakeClock `app` runs on."""
    assert isinstance(app.clock, FakeClock), "the test is not marked fake_time"
    return app.clock


async def pass_until(
    app: App, predicate: Callable[[], Awaitable[bool] | bool], *, message: str = ""
) -> None:
    """Move the app's clock on, one wake-up at a time, until `predicate` holds."""
    await advance_until(clock_of(app), predicate, step=STEP, timeout=PATIENCE, message=message)


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
