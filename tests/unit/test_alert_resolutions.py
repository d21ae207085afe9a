"""The supervisor's outbox of resolved alerts: told to the sinks at least once, never holding a scan.

`Resolutions.once` reads the resolutions not told yet and tells them in the
background; they are marked told only once every sink was tried, so a mark
that fails leaves them for the next scan, and a sink still busy with some
keeps them from being read (and sent) twice meanwhile.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import UTC, datetime

from shepherd.core.alerts import AlertState, StoredAlert
from shepherd.errors import StoreUnavailableError
from shepherd.store.ops import MarkResolutionsSent, UnsentResolutions
from shepherd.store.ops.alerts import Alerts
from shepherd.supervisor.resolutions import Resolutions
from shepherd.testing import wait_until
from support.fake_store import ByOperation, Handlers

AT = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


def resolved(alert_id: int) -> StoredAlert:
    return StoredAlert(
        id=alert_id,
        task_id=f"t-{alert_id}",
        workflow="orders.pay",
        key=None,
        reason="bug",
        failure_count=0,
        raised_at=AT,
        state=AlertState.RESOLVED,
        resolved_at=AT,
        resolved_by="task processed",
    )


@dataclass
class Outbox(ByOperation, Alerts):
    """The store's unsent resolutions; marking may be made to fail."""

    unsent: dict[int, StoredAlert] = field(default_factory=dict)
    marks_fail: bool = False

    def handlers(self) -> Handlers:
        return {UnsentResolutions: self.read_unsent, MarkResolutionsSent: self.mark}

    async def read_unsent(self, op: UnsentResolutions) -> list[StoredAlert]:
        return sorted(self.unsent.values(), key=lambda a: a.id)[: op.limit]

    async def mark(self, op: MarkResolutionsSent) -> None:
        if self.marks_fail:
            raise StoreUnavailableError("the store is down")
        for alert_id in op.alert_ids:
            self.unsent.pop(alert_id, None)


async def test_each_resolution_is_told_then_marked_and_not_told_again() -> None:
    store = Outbox(unsent={1: resolved(1), 2: resolved(2)})
    told: list[int] = []

    async def announce(alert: StoredAlert) -> None:
        told.append(alert.id)

    outbox = Resolutions(store, announce)

    assert await outbox.once() == 2
    await wait_until(lambda: not store.unsent, timeout=5.0, message="never marked")
    assert await outbox.once() == 0
    assert sorted(told) == [1, 2]
    assert outbox.sent == 2


async def test_a_slow_sink_holds_no_scan_and_its_resolutions_are_not_read_twice() -> None:
    store = Outbox(unsent={1: resolved(1)})
    release = asyncio.Event()
    told: list[int] = []

    async def announce(alert: StoredAlert) -> None:
        told.append(alert.id)
        await release.wait()  # a webhook that takes its time

    outbox = Resolutions(store, announce)
    assert await outbox.once() == 1  # returns at once: the sink works in the background
    await wait_until(lambda: told == [1], timeout=5.0)
    store.unsent[2] = resolved(2)

    assert await outbox.once() == 1  # only the new one: 1 is in flight
    release.set()
    await wait_until(lambda: not store.unsent, timeout=5.0, message="never marked")
    assert sorted(told) == [1, 2]
    await outbox.close()


async def test_a_mark_that_fails_leaves_the_resolution_to_be_told_again() -> None:
    store = Outbox(unsent={1: resolved(1)}, marks_fail=True)
    told: list[int] = []

    async def announce(alert: StoredAlert) -> None:
        told.append(alert.id)

    outbox = Resolutions(store, announce)
    assert await outbox.once() == 1
    await wait_until(lambda: told == [1] and outbox.in_flight == 0, timeout=5.0)
    store.marks_fail = False

    assert await outbox.once() == 1  # at least once: told again
    await wait_until(lambda: not store.unsent, timeout=5.0, message="never marked")
    assert told == [1, 1]


async def test_closing_cancels_what_is_in_flight_unmarked() -> None:
    store = Outbox(unsent={1: resolved(1)})

    async def announce(alert: StoredAlert) -> None:
        await asyncio.Event().wait()  # never answers

    outbox = Resolutions(store, announce)
    await outbox.once()

    await outbox.close()

    assert list(store.unsent) == [1]  # the next leader tells it
