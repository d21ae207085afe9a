"""The writers' turn on SQLite is handed over: a writer that waits gets the next turn.

Another process takes the turn back to back (a worker committing batch after
batch) and counts its turns in a file of its own while it holds each one. A
writer of this process that waits for the turn must get it within a bounded
number of those turns once it has raised the waiters' flag (a count, not a
time): without the hand-over, the holder takes the turn again before the woken
waiter has run, nearly every time. A lone write on the event loop looks for
the turn there, and so commits on the loop while the other process writes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from shepherd.store.sqlite import SQLiteStore
from shepherd.store.sqlite.write_lock import POLL, WaitFlag, WriteLock, wait_path
from support.factories import new_task

#: Seconds to wait for what must happen (a backstop, not a timing claim).
PATIENCE = 30.0
#: The holder's turns a waiting writer may see begin once its flag is raised: one,
#: if the holder looked at the flag just before it was raised.
MOST_TURNS = 1
#: Waits for the turn watched in each test.
WAITS = 20

_BUSY_HOLDER = """
import os, sys
from shepherd.store.sqlite.write_lock import WriteLock
db, counter = sys.argv[1], sys.argv[2]
fd = os.open(counter, os.O_RDWR | os.O_CREAT, 0o666)
turn = WriteLock(db, timeout=float(sys.argv[3]), hand_over=float(sys.argv[3]))
turn.open()
turns = 0
while True:
    turn.acquire()
    turns += 1
    os.pwrite(fd, turns.to_bytes(8, "little"), 0)
    turn.release()
"""

_STILL_HOLDER = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_CREAT, 0o666)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
sys.stdin.read()
"""


def turns_taken(counter: Path) -> int:
    """The holder's turns so far, as it wrote them (0 before its first)."""
    try:
        data = counter.read_bytes()
    except FileNotFoundError:
        return 0
    return int.from_bytes(data[:8], "little") if len(data) >= 8 else 0


@contextmanager
def busy_holder(db: Path, counter: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A process that takes the turn of `db` back to back until it is killed."""
    with subprocess.Popen(
        [sys.executable, "-c", _BUSY_HOLDER, str(db), str(counter), str(PATIENCE)]
    ) as holder:
        try:
            deadline = time.monotonic() + PATIENCE
            while turns_taken(counter) < 100:  # a poll with a deadline: it runs back to back
                assert holder.poll() is None, "the holder stopped"
                assert time.monotonic() < deadline, "the holder never took the turn"
                time.sleep(0.001)
            yield holder
        finally:
            holder.kill()
            holder.wait(timeout=PATIENCE)


def by_thread(poll: float) -> Callable[[WriteLock], bool]:
    """A writer of the connection's thread: it may wait, looking itself for `poll` s first."""

    def take(turn: WriteLock) -> bool:
        turn.poll = poll
        return turn.acquire()

    return take


def on_the_loop(turn: WriteLock) -> bool:
    """A lone write on the event loop: it looks for the turn itself, for a bounded time."""
    return turn.acquire_within(PATIENCE)


@pytest.mark.parametrize(
    "take",
    [by_thread(POLL), by_thread(0.0), on_the_loop],
    ids=["looks-itself", "waiting-thread", "lone-on-the-loop"],
)
def test_a_waiting_writer_gets_the_turn_within_one_of_a_busy_holders_turns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, take: Callable[[WriteLock], bool]
) -> None:
    db = tmp_path / "turn.db"
    counter = tmp_path / "turns"
    # The holder's count when this writer first raised the flag in each wait.
    raised_at: list[int] = []
    lift = WaitFlag.raise_

    def raise_and_note(flag: WaitFlag) -> None:
        lift(flag)
        raised_at.append(turns_taken(counter))

    monkeypatch.setattr(WaitFlag, "raise_", raise_and_note)
    turn = WriteLock(str(db), timeout=PATIENCE)
    turn.open()
    seen: list[int] = []
    try:
        with busy_holder(db, counter):
            deadline = time.monotonic() + PATIENCE
            while len(seen) < WAITS:  # until it has had to wait that often (a deadline as backstop)
                assert time.monotonic() < deadline, f"waited only {len(seen)} times"
                raised_at.clear()
                assert take(turn)
                if raised_at:  # it waited: the holder's turns since, frozen while it is ours
                    seen.append(turns_taken(counter) - raised_at[0])
                turn.release()
    finally:
        turn.close()

    assert max(seen) <= MOST_TURNS


def test_a_look_for_the_turn_that_does_not_come_holds_nothing_and_lowers_the_flag(
    tmp_path: Path,
) -> None:
    db = str(tmp_path / "turn.db")
    turn = WriteLock(db, timeout=PATIENCE)
    turn.open()
    watcher = WaitFlag(wait_path(db))
    try:
        with subprocess.Popen(
            [sys.executable, "-c", _STILL_HOLDER, db + "-lock"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        ) as holder:
            try:
                assert holder.stdout is not None
                assert holder.stdout.readline().strip() == "held"
                assert not turn.acquire_within(0.01)  # a holder that never lets go
                assert not watcher.raised()  # the look is over: nobody waits any more
                assert (turn.lone_waits, turn.lone_turns) == (1, 0)
            finally:
                holder.kill()
                holder.wait(timeout=PATIENCE)
        assert turn.acquire_within(PATIENCE)  # its lock died with it
        assert (turn.lone_waits, turn.lone_turns) == (1, 0)  # free at once: no look
        turn.release()
    finally:
        watcher.close()
        turn.close()


async def test_a_lone_submit_while_another_process_writes_back_to_back_commits_on_the_loop(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(f"sqlite:///{tmp_path}/turn.db", synchronous="NORMAL")
    await store.open()
    try:
        with busy_holder(Path(store.path), tmp_path / "turns"):
            deadline = time.monotonic() + PATIENCE
            # Each submit is awaited alone, so it may commit on the loop; one that
            # finds the turn taken looks for it there (a deadline as backstop).
            while store.statistics()["turn_lone_turns"] < 1:
                assert time.monotonic() < deadline, store.statistics()
                created = await store.submit_task(new_task())
                assert created.created
        stats = store.statistics()
    finally:
        await store.close()

    assert stats["lone_writes"] >= stats["turn_lone_turns"] >= 1


def test_a_writer_lets_the_turn_go_only_while_another_waits(tmp_path: Path) -> None:
    db = str(tmp_path / "turn.db")
    first = WriteLock(db)
    first.open()
    try:
        for _ in range(3):  # nobody waits: the turn is taken again at once
            assert first.acquire(wait=False)
            first.release()
        assert first.hand_overs == 0
        assert os.path.isfile(wait_path(db))
    finally:
        first.close()


def test_a_batch_writer_lingers_once_after_each_turn_it_handed_over(tmp_path: Path) -> None:
    db = str(tmp_path / "turn.db")
    turn = WriteLock(db, timeout=PATIENCE, hand_over=PATIENCE, linger=0.0001)
    turn.open()
    other = WaitFlag(wait_path(db))  # another writer's flag, raised and lowered by hand
    try:
        assert turn.acquire(linger=True)
        other.raise_()  # another writer waits while this one holds the turn...
        turn.release()
        other.lower()  # ...and has taken it (it lowers its flag once it holds the turn)
        assert turn.acquire(linger=True)  # handed over: it lingers before asking again
        turn.release()
        assert turn.acquire(linger=True)  # nobody waited: no hand-over, no linger
        turn.release()
        other.raise_()
        turn.release()  # not held: nothing let go, nothing owed
        assert turn.acquire(linger=True)
        turn.release()  # let go while the other waits
        other.lower()
        assert turn.acquire(linger=False)  # a client's submit does not linger
        turn.release()
    finally:
        other.close()
        turn.close()

    assert (turn.hand_overs, turn.hand_overs_missed, turn.lingers) == (2, 0, 1)
