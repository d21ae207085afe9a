"""The SQLite store's connection thread: calls in order, writes in group commits, callers settled.

The thread runs a batch runner given to it; here the runner is a plain function
that records what it ran (and, where a test needs it, waits for the test to
let it go on), so the tests check the thread's own rules without a database.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from shepherd.errors import StoreUnavailableError
from shepherd.store.ops import Write
from shepherd.store.sqlite.thread import ConnectionThread
from shepherd.testing import wait_until


@dataclass(frozen=True)
class Echo(Write[str]):
    """A write whose outcome is its text (or, for "boom", an error of its own)."""

    text: str


class Runner:
    """Runs batches on the thread: records them; may hold the next one until released."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.rung: list[set[str]] = []
        self.hold = threading.Event()
        self.hold.set()
        self.started = threading.Event()
        self.fail_with: BaseException | None = None

    def run(self, ops: Sequence[Write[Any]]) -> tuple[list[object], set[str]]:
        texts = [op.text for op in ops if isinstance(op, Echo)]
        self.started.set()
        self.hold.wait(timeout=30)
        self.batches.append(texts)
        if self.fail_with is not None:
            raise self.fail_with
        outcomes: list[object] = [
            ValueError(f"refused {t}") if t == "boom" else t.upper() for t in texts
        ]
        return outcomes, {f"rung:{t}" for t in texts}

    def after_commit(self, rings: set[str]) -> None:
        self.rung.append(rings)


@pytest.fixture
async def runner() -> Runner:
    return Runner()


@pytest.fixture
async def thread(runner: Runner) -> AsyncIterator[ConnectionThread]:
    made = ConnectionThread(
        runner.run,
        runner.after_commit,
        closed=lambda: StoreUnavailableError("closed"),
        name="test-connection",
    )
    yield made
    runner.hold.set()
    made.shutdown(wait=True)


async def test_writes_of_one_turn_share_a_batch_and_each_caller_gets_its_own_outcome(
    thread: ConnectionThread, runner: Runner
) -> None:
    outcomes = await asyncio.gather(
        *(thread.write(Echo(t)) for t in ("a", "boom", "c")), return_exceptions=True
    )

    assert runner.batches == [["a", "boom", "c"]]
    assert outcomes[0] == "A"
    assert isinstance(outcomes[1], ValueError)
    assert outcomes[2] == "C"
    assert runner.rung == [{"rung:a", "rung:boom", "rung:c"}]


async def test_writes_made_while_a_batch_runs_go_together_into_the_next(
    thread: ConnectionThread, runner: Runner
) -> None:
    runner.hold.clear()
    first = thread.write(Echo("first"))
    await wait_until(runner.started.is_set, timeout=30)
    later = [thread.write(Echo(t)) for t in ("x", "y", "z")]
    runner.hold.set()

    assert await first == "FIRST"
    assert await asyncio.gather(*later) == ["X", "Y", "Z"]
    assert runner.batches == [["first"], ["x", "y", "z"]]


async def test_the_backlog_counts_the_writes_waiting_and_those_in_flight(
    thread: ConnectionThread, runner: Runner
) -> None:
    assert thread.backlog() == 0
    runner.hold.clear()
    first = thread.write(Echo("first"))
    assert thread.backlog() == 1  # waiting for its turn of the loop
    await wait_until(runner.started.is_set, timeout=30)
    later = [thread.write(Echo(t)) for t in ("x", "y")]
    assert thread.backlog() == 3  # one in flight, two waiting
    runner.hold.set()

    await first
    await asyncio.gather(*later)
    assert thread.backlog() == 0


async def test_the_channels_are_rung_before_the_callers_resume(
    thread: ConnectionThread, runner: Runner
) -> None:
    seen_by_caller: list[list[set[str]]] = []

    async def write_then_look() -> None:
        await thread.write(Echo("a"))
        seen_by_caller.append(list(runner.rung))

    await write_then_look()

    assert seen_by_caller == [[{"rung:a"}]]


async def test_a_batch_that_fails_whole_fails_every_caller_and_rings_nothing(
    thread: ConnectionThread, runner: Runner
) -> None:
    runner.fail_with = StoreUnavailableError("the disk is gone")

    outcomes = await asyncio.gather(
        thread.write(Echo("a")), thread.write(Echo("b")), return_exceptions=True
    )

    assert [str(o) for o in outcomes] == ["the disk is gone", "the disk is gone"]
    assert runner.rung == []


async def test_a_caller_cancelled_mid_batch_is_skipped_and_the_others_are_settled(
    thread: ConnectionThread, runner: Runner
) -> None:
    runner.hold.clear()
    gone = asyncio.ensure_future(thread.write(Echo("gone")))
    kept = asyncio.ensure_future(thread.write(Echo("kept")))
    await wait_until(runner.started.is_set, timeout=30)
    gone.cancel()
    runner.hold.set()

    assert await kept == "KEPT"
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert runner.batches == [["gone", "kept"]]  # its write ran all the same


async def test_calls_run_in_order_on_the_thread_and_raise_to_their_caller(
    thread: ConnectionThread,
) -> None:
    names: list[str] = []

    def who() -> str:
        names.append(threading.current_thread().name)
        return "ok"

    def fails() -> str:
        raise LookupError("no such row")

    assert list(await asyncio.gather(thread.call(who), thread.call(who))) == ["ok", "ok"]
    with pytest.raises(LookupError, match="no such row"):
        await thread.call(fails)
    assert names == ["test-connection", "test-connection"]


async def test_after_shutdown_calls_and_writes_fail_as_closed_and_nothing_hangs(
    thread: ConnectionThread, runner: Runner
) -> None:
    runner.hold.clear()
    running = thread.write(Echo("running"))
    await wait_until(runner.started.is_set, timeout=30)
    waiting = thread.write(Echo("waiting"))  # for the next batch, which never comes
    thread.shutdown(wait=False)
    runner.hold.set()

    assert await running == "RUNNING"
    with pytest.raises(StoreUnavailableError, match="closed"):
        await waiting
    with pytest.raises(StoreUnavailableError, match="closed"):
        await thread.write(Echo("late"))
    with pytest.raises(StoreUnavailableError, match="closed"):
        await thread.call(lambda: "late")
    assert runner.batches == [["running"]]


async def test_callers_learn_of_their_commit_even_if_announcing_it_fails(
    runner: Runner, caplog: pytest.LogCaptureFixture
) -> None:
    def announce(rings: set[str]) -> None:
        raise OSError("no wake-up socket")

    made = ConnectionThread(
        runner.run, announce, closed=lambda: StoreUnavailableError("closed"), name="test-failing"
    )
    try:
        assert await made.write(Echo("a")) == "A"
    finally:
        made.shutdown(wait=True)
    assert "no wake-up socket" in caplog.text
