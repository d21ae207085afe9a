"""Lone writes on the loop, and the writers' turn: the connection thread's rules, without a database.

A write that finds nothing else to do is run on the event loop by the store's
lone runner (here a function that records it, or says the store is busy);
every other write goes to the thread, which takes its batch only once it holds
the writers' turn (here a fake turn the test can keep taken).
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
from shepherd.store.sqlite import thread as thread_module
from shepherd.store.sqlite.thread import ConnectionThread, LoneDone
from shepherd.testing import wait_until

PATIENCE = 30.0


@dataclass(frozen=True)
class Echo(Write[str]):
    text: str


@dataclass(frozen=True)
class Other(Write[str]):
    """A kind of write not named lone (as a role's writes are not)."""

    text: str


class Turn:
    """A writers' turn the test can hold, as another process would."""

    def __init__(self) -> None:
        self.free = threading.Event()
        self.free.set()
        self.waiting = threading.Event()
        # `linger` of each wait for the turn.
        self.lingered: list[bool] = []

    def acquire(self, *, wait: bool = True, linger: bool = False) -> bool:
        if wait:
            self.lingered.append(linger)
        if not wait:
            return self.free.is_set()
        self.waiting.set()
        return self.free.wait(timeout=PATIENCE)

    def release(self) -> None:
        pass


class Runners:
    """The thread's batch runner and the loop's lone runner; each records what it ran, and where."""

    def __init__(self) -> None:
        self.on_thread: list[list[str]] = []
        self.on_loop: list[list[str]] = []
        self.store_busy = False
        self.fail_with: Exception | None = None
        self.before_jobs = 0
        # The seconds each lone write says it waited for the turn.
        self.waited = 0.0

    def batch(self, ops: Sequence[Write[Any]]) -> tuple[list[object], set[str]]:
        texts = [op.text for op in ops if isinstance(op, Echo | Other)]
        self.on_thread.append(texts)
        return [t.upper() for t in texts], {"rung"}

    def lone(self, ops: Sequence[Write[Any]]) -> LoneDone | None:
        if self.store_busy:
            return None
        if self.fail_with is not None:
            raise self.fail_with
        texts = [op.text for op in ops if isinstance(op, Echo)]
        self.on_loop.append(texts)
        return [t.upper() for t in texts], {"rung"}, self.waited

    def before_job(self) -> None:
        self.before_jobs += 1


@pytest.fixture
def runners() -> Runners:
    return Runners()


@pytest.fixture
def turn() -> Turn:
    return Turn()


@pytest.fixture
async def thread(runners: Runners, turn: Turn) -> AsyncIterator[ConnectionThread]:
    made = ConnectionThread(
        runners.batch,
        lambda rings: None,
        closed=lambda: StoreUnavailableError("closed"),
        name="test-lone",
        turn=turn,
        run_lone=runners.lone,
        lone_kinds=[Echo],
        before_job=runners.before_job,
    )
    yield made
    turn.free.set()
    made.shutdown(wait=True)


async def test_a_lone_write_runs_on_the_loop_and_is_settled_at_once(
    thread: ConnectionThread, runners: Runners
) -> None:
    assert await thread.write(Echo("alone")) == "ALONE"

    assert runners.on_loop == [["alone"]]
    assert runners.on_thread == []
    assert thread.lone == 1


async def test_writes_of_one_turn_of_the_loop_go_to_the_thread_together(
    thread: ConnectionThread, runners: Runners
) -> None:
    made = [thread.write(Echo(t)) for t in "abc"]  # by one coroutine, before it awaits
    assert [await w for w in made] == ["A", "B", "C"]
    assert await asyncio.gather(*(thread.write(Echo(t)) for t in "xy")) == ["X", "Y"]

    assert runners.on_thread == [["a", "b", "c"], ["x", "y"]]
    assert runners.on_loop == []


async def test_only_the_kinds_of_write_named_lone_run_on_the_loop(
    thread: ConnectionThread, runners: Runners
) -> None:
    assert await thread.write(Other("role")) == "ROLE"
    assert await thread.write(Echo("client")) == "CLIENT"

    assert runners.on_thread == [["role"]]
    assert runners.on_loop == [["client"]]


async def test_a_write_awaited_beside_other_ready_work_goes_to_the_thread(
    thread: ConnectionThread, runners: Runners
) -> None:
    other = asyncio.ensure_future(asyncio.sleep(0))  # ready in this turn too

    assert await thread.write(Echo("busy loop")) == "BUSY LOOP"
    await other
    assert runners.on_thread == [["busy loop"]]


async def test_a_lone_write_that_finds_the_store_busy_goes_to_the_thread(
    thread: ConnectionThread, runners: Runners
) -> None:
    runners.store_busy = True

    assert await thread.write(Echo("later")) == "LATER"

    assert runners.on_thread == [["later"]]
    assert runners.before_jobs == 1  # the thread's busy timeout was set back first
    assert thread.lone == 0


async def test_a_lone_write_that_fails_fails_its_caller_only(
    thread: ConnectionThread, runners: Runners
) -> None:
    runners.fail_with = StoreUnavailableError("the disk is full")

    with pytest.raises(StoreUnavailableError, match="the disk is full"):
        await thread.write(Echo("refused"))
    runners.fail_with = None
    assert await thread.write(Echo("next")) == "NEXT"
    assert runners.on_loop == [["next"]]


async def test_a_slow_lone_write_sends_the_next_ones_to_the_thread_for_a_while(
    thread: ConnectionThread, runners: Runners, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(thread_module, "LONE_SLOW", -1.0)  # every lone write is "slow"
    monkeypatch.setattr(thread_module, "LONE_PAUSE", 3600.0)

    assert await thread.write(Echo("slow")) == "SLOW"
    assert await thread.write(Echo("after")) == "AFTER"

    assert runners.on_loop == [["slow"]]
    assert runners.on_thread == [["after"]]


async def test_a_lone_writes_wait_for_the_turn_does_not_count_as_slow(
    thread: ConnectionThread, runners: Runners, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(thread_module, "LONE_SLOW", 0.0)
    monkeypatch.setattr(thread_module, "LONE_PAUSE", 3600.0)
    runners.waited = 3600.0  # all of its time went in the wait for the turn

    assert await thread.write(Echo("waited")) == "WAITED"
    assert await thread.write(Echo("after")) == "AFTER"

    assert runners.on_loop == [["waited"], ["after"]]
    assert runners.on_thread == []


async def test_a_lone_write_that_looked_for_the_turn_in_vain_leaves_the_next_one_its_look(
    thread: ConnectionThread, runners: Runners, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(thread_module, "LONE_SLOW", 0.0)  # only a wait could make it slow
    monkeypatch.setattr(thread_module, "LONE_PAUSE", 3600.0)
    runners.store_busy = True  # the turn did not come: the thread's

    assert await thread.write(Echo("refused")) == "REFUSED"
    runners.store_busy = False
    assert await thread.write(Echo("after")) == "AFTER"

    assert runners.on_thread == [["refused"]]
    assert runners.on_loop == [["after"]]


async def test_only_a_batch_with_more_than_submits_lingers_after_a_hand_over(
    thread: ConnectionThread, runners: Runners, turn: Turn
) -> None:
    runners.store_busy = True  # the submit goes to the thread too

    assert await thread.write(Echo("submit")) == "SUBMIT"
    assert await thread.write(Other("work")) == "WORK"

    assert runners.on_thread == [["submit"], ["work"]]
    assert turn.lingered == [False, True]


async def test_a_write_while_the_thread_runs_a_call_waits_for_the_thread(
    thread: ConnectionThread, runners: Runners
) -> None:
    release = threading.Event()
    entered = threading.Event()

    def slow_read() -> str:
        entered.set()
        release.wait(timeout=PATIENCE)
        return "read"

    read = thread.call(slow_read)
    await wait_until(entered.is_set, timeout=PATIENCE)
    written = asyncio.ensure_future(thread.write(Echo("behind")))
    release.set()

    assert await read == "read"
    assert await written == "BEHIND"
    assert runners.on_thread == [["behind"]]  # never on the loop beside the thread
    assert runners.on_loop == []


async def test_writes_made_while_another_process_has_the_turn_join_one_batch(
    thread: ConnectionThread, runners: Runners, turn: Turn
) -> None:
    turn.free.clear()  # the thread waits for the turn...
    runners.store_busy = True  # ...and a lone write is refused it
    first = asyncio.ensure_future(thread.write(Echo("first")))
    await wait_until(turn.waiting.is_set, timeout=PATIENCE)
    later = [asyncio.ensure_future(thread.write(Echo(t))) for t in ("x", "y")]
    turn.free.set()

    assert await asyncio.gather(first, *later) == ["FIRST", "X", "Y"]
    assert runners.on_thread == [["first", "x", "y"]]


async def test_a_lone_writer_learns_of_its_commit_even_if_announcing_it_fails(
    runners: Runners, caplog: pytest.LogCaptureFixture
) -> None:
    def announce(rings: set[str]) -> None:
        raise OSError("no wake-up socket")

    made = ConnectionThread(
        runners.batch,
        announce,
        closed=lambda: StoreUnavailableError("closed"),
        name="test-lone-failing",
        run_lone=runners.lone,
        lone_kinds=[Echo],
    )
    try:
        assert await made.write(Echo("kept")) == "KEPT"
    finally:
        made.shutdown(wait=True)
    assert runners.on_loop == [["kept"]]
    assert "no wake-up socket" in caplog.text
