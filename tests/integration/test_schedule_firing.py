"""Schedules fired by the supervisors of a cluster, on a FakeClock: one task per tick.

Three supervisors share one store (SQLite, then PostgreSQL); each scans at
every step, only the leader fires, and at every step the schedules are also
fired as if every one of them believed it led: an `every=1` schedule still
makes exactly one task per tick, its key holding the tick. Then every process
stops for 5 ticks, and each catch-up policy fires exactly what it promises.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from shepherd import App, WorkflowContext
from shepherd.core.schedules import tick_key
from shepherd.supervisor.schedules import fire_schedules, grace_of
from shepherd.supervisor.supervisor import Supervisor

if TYPE_CHECKING:
    from shepherd.core.records import JsonValue
    from shepherd.testing import FakeClock

START = datetime(2030, 1, 1, tzinfo=UTC)  # the FakeClock's start: a whole second
POLICIES = {"skip": ("skip", 10), "latest": ("latest", 10), "all": ("all", 10), "all3": ("all", 3)}


def at(seconds: int) -> datetime:
    return START + timedelta(seconds=seconds)


async def _ticks(app: App, name: str) -> list[str]:
    tasks = await app.list_tasks(workflow="report", limit=1000)
    return sorted(t.key for t in tasks if t.key and t.key.startswith(f"schedule:{name}@"))


async def test_three_supervisors_fire_one_task_per_tick_and_catch_up_as_promised(
    store_url: str, fake_clock: FakeClock
) -> None:
    app = App(store_url, clock=fake_clock, supervisor_interval=0.1, lease_ttl=0.3)

    @app.workflow("report")
    async def report(ctx: WorkflowContext, data: Any) -> JsonValue:
        return data  # pragma: no cover - no scheduler runs here

    for name, (policy, cap) in POLICIES.items():
        app.schedule(
            name, workflow="report", every=1, data={"of": name}, catch_up=policy, max_catch_up=cap
        )
    grace = grace_of(app.settings.supervisor_interval, app.settings.lease_ttl)
    async with app:
        supervisors = [
            Supervisor(
                app.store,
                holder=f"v{i}",
                instance=f"here:{i}:ab",
                settings=app.settings,
                clock=fake_clock,
                workflows=app.workflows,
                raise_alert=lambda *a, **k: None,
            )
            for i in range(3)
        ]

        async def step() -> None:
            for supervisor in supervisors:
                await supervisor.scan_once()
                # As if it led too (a lease it lost without knowing): the keys hold.
                await fire_schedules(app.store, grace=grace)

        while fake_clock.now() < at(10):
            fake_clock.advance(0.5)
            await step()
        for name in POLICIES:
            assert await _ticks(app, name) == sorted(tick_key(name, at(s)) for s in range(1, 11))
        assert sum(s.fired for s in supervisors) == 4 * 10
        assert sum(bool(s.lease) for s in supervisors) == 1

        # Every process stops for 5 ticks (11 to 15); the next look is at 16.3.
        fake_clock.advance(6.3)
        await step()
        caught = {name: await _ticks(app, name) for name in POLICIES}
        promised = {
            "skip": [16],
            "latest": [15, 16],
            "all": list(range(11, 17)),
            "all3": [13, 14, 15, 16],
        }
        for name, seconds in promised.items():
            before = [tick_key(name, at(s)) for s in range(1, 11)]
            assert caught[name] == sorted(before + [tick_key(name, at(s)) for s in seconds]), name
        task = (await app.list_tasks(workflow="report", key=tick_key("all3", at(13))))[0]
        assert task.input == {"of": "all3"}
