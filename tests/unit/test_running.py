"""run_roles: every role ends when the process stops, even one that lost its cancellation."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from shepherd import running
from shepherd.errors import RoleStoppedError
from shepherd.running import run_roles


@pytest.fixture(autouse=True)
def quick_recheck(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cancel again after a hundredth of a second, not a second."""
    monkeypatch.setattr(running, "STOP_RECHECK", 0.01)


class Swallows:
    """A role whose first cancellation is lost (as `asyncio.wait_for` can lose one on 3.11)."""

    def __init__(self) -> None:
        self.cancels = 0
        self.waiting = asyncio.Event()
        self.ended = asyncio.Event()

    async def run(self) -> None:
        try:
            while True:
                try:
                    self.waiting.set()
                    await asyncio.Event().wait()
                except asyncio.CancelledError:
                    self.cancels += 1
                    if self.cancels > 1:
                        raise
                    asyncio.current_task().uncancel()  # type: ignore[union-attr]
        finally:
            self.ended.set()


class Returns:
    """A role that ends on its own at once."""

    async def run(self) -> None:
        return None


async def test_a_role_that_lost_its_cancel_is_cancelled_again() -> None:
    deaf = Swallows()
    with pytest.raises(RoleStoppedError, match="Returns role returned"):
        await run_roles([deaf, Returns()])
    assert deaf.ended.is_set()
    assert deaf.cancels == 2


async def test_stopping_from_outside_waits_for_every_role_then_ends_cancelled() -> None:
    deaf = Swallows()
    job = asyncio.create_task(run_roles([deaf]))
    await deaf.waiting.wait()
    job.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await job
    assert job.cancelled()
    assert deaf.ended.is_set()
    assert deaf.cancels == 2
