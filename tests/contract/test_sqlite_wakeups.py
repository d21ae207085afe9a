"""SQLite wake-ups between stores on one file: datagrams ring the other store's channels.

Two stores opened on the same file stand for two processes (each has its own
socket, as a process does; tests/e2e/test_wakeup_processes.py runs real ones).
A socket left by a dead process is a real socket file whose socket was closed
without removing it, as a SIGKILL leaves it.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from shepherd.store import signals as ch
from shepherd.store.signals import Signals
from shepherd.store.sqlite import SQLiteStore
from shepherd.store.sqlite.wakeups import EVERYTHING, channels_of, wake_folder
from shepherd.testing import wait_until
from support.factories import claimed_task, new_task

#: Seconds to wait for a wake-up before failing (a backstop, not a timing claim).
PATIENCE = 30.0


@pytest.fixture
def short_temp_dir() -> Iterator[Callable[[], str]]:
    """Make temp directories with short paths (tmp_path's are too long for a socket)."""
    made: list[str] = []

    def make() -> str:
        made.append(tempfile.mkdtemp(prefix="sw", dir="/tmp"))
        return made[-1]

    yield make
    for path in made:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
async def stores(tmp_path: Path) -> AsyncIterator[Callable[[Path], SQLiteStore]]:
    """Make stores (opened by the test) on a file; every one is closed at the end."""
    made: list[SQLiteStore] = []

    def make(path: Path) -> SQLiteStore:
        store = SQLiteStore(f"sqlite:///{path}", synchronous="NORMAL")
        made.append(store)
        return store

    yield make
    for store in made:
        await store.close()


def dead_socket(folder: str, name: str = "4000000-deadbeef.sock") -> str:
    """A socket file in `folder` that nothing reads any more, as a killed process leaves it."""
    path = os.path.join(folder, name)
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(path)
    return path


def busy_peer(folder: str) -> socket.socket:
    """A socket in `folder` that reads only when the test says so (a busy process)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.setblocking(False)
    sock.bind(os.path.join(folder, "4000001-0000beef.sock"))
    return sock


def drain(sock: socket.socket) -> list[str]:
    """The channels of every datagram waiting on `sock`."""
    rung: list[str] = []
    while True:
        try:
            rung += channels_of(sock.recv(65536))
        except BlockingIOError:
            return rung


async def test_a_commit_in_one_store_wakes_another_on_the_same_file(
    stores: Callable[[Path], SQLiteStore], tmp_path: Path
) -> None:
    writer, waiter = stores(tmp_path / "shared.db"), stores(tmp_path / "shared.db")
    await writer.open()
    await waiter.open()

    new_work = waiter.signals.event(ch.TASKS)
    history = waiter.signals.event(ch.EVENTS)
    task = await claimed_task(writer)
    assert await Signals.wait(new_work, PATIENCE)
    assert await Signals.wait(history, PATIENCE)

    ended = waiter.signals.event(ch.task_channel(task.id))
    await writer.finish_task(task.id, locked_by="s1", epoch=task.lock_epoch, result={"ok": True})
    assert await Signals.wait(ended, PATIENCE)
    # A store is not sent its own commits: it rang them itself.
    assert writer.statistics()["wakeups_received"] == 0
    assert waiter.statistics()["wakeups_received"] >= 2


async def test_the_socket_of_a_dead_process_is_removed_when_a_commit_is_announced(
    stores: Callable[[Path], SQLiteStore], tmp_path: Path
) -> None:
    writer, waiter = stores(tmp_path / "shared.db"), stores(tmp_path / "shared.db")
    await writer.open()
    await waiter.open()
    stale = dead_socket(writer.wakeups.folder)

    new_work = waiter.signals.event(ch.TASKS)
    await writer.submit_task(new_task())

    assert os.path.basename(stale) not in os.listdir(writer.wakeups.folder)
    assert await Signals.wait(new_work, PATIENCE)


async def test_the_sockets_of_dead_processes_are_removed_at_open(
    stores: Callable[[Path], SQLiteStore], tmp_path: Path
) -> None:
    folder = wake_folder(str(tmp_path / "shared.db"))
    os.mkdir(folder, 0o700)
    stale = dead_socket(folder)
    store = stores(tmp_path / "shared.db")

    await store.open()

    assert stale != store.wakeups.path
    assert os.listdir(folder) == [os.path.basename(store.wakeups.path)]


async def test_a_peer_too_busy_to_read_is_sent_its_channels_once_it_reads(
    stores: Callable[[Path], SQLiteStore], tmp_path: Path
) -> None:
    store, other = stores(tmp_path / "shared.db"), stores(tmp_path / "shared.db")
    await store.open()
    await other.open()
    with busy_peer(store.wakeups.folder) as busy:
        # Commit until the busy peer's queue is full (the kernel bounds it).
        for _ in range(5000):
            await store.submit_task(new_task())
            if store.statistics()["wakeups_deferred"]:
                break
        assert store.statistics()["wakeups_deferred"], "the peer's queue never filled"

        # A full peer holds up no other.
        new_work = other.signals.event(ch.TASKS)
        await store.submit_task(new_task())
        assert await Signals.wait(new_work, PATIENCE)

        # What it could not take then is sent again once it reads, without another commit.
        assert ch.TASKS in drain(busy)
        owed: list[str] = []

        def delivered() -> bool:
            owed.extend(drain(busy))
            return ch.TASKS in owed

        await wait_until(delivered, timeout=PATIENCE, message="the owed channels never came")
        await wait_until(lambda: store.statistics()["wakeups_owed"] == 0, timeout=PATIENCE)


async def test_a_peer_that_never_reads_is_given_up_on(
    stores: Callable[[Path], SQLiteStore], tmp_path: Path
) -> None:
    store = stores(tmp_path / "shared.db")
    await store.open()
    with busy_peer(store.wakeups.folder):
        for _ in range(5000):
            await store.submit_task(new_task())
            if store.statistics()["wakeups_owed"]:
                break
        assert store.statistics()["wakeups_owed"], "the peer's queue never filled"

        # No timer keeps running for it: an idle store stays idle; the peer polls.
        await wait_until(
            lambda: store.statistics()["wakeups_owed"] == 0,
            timeout=PATIENCE,
            message="the store never stopped retrying a peer that reads nothing",
        )


async def test_everything_rings_every_channel(
    stores: Callable[[Path], SQLiteStore], tmp_path: Path
) -> None:
    store = stores(tmp_path / "shared.db")
    await store.open()
    waits = [store.signals.event(channel) for channel in (ch.TASKS, ch.task_channel("t1"))]

    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sender:
        sender.sendto(EVERYTHING.encode(), store.wakeups.path)

    for event in waits:
        assert await Signals.wait(event, PATIENCE)


async def test_close_removes_the_socket_and_the_folder_with_the_last_store(
    stores: Callable[[Path], SQLiteStore], short_temp_dir: Callable[[], str]
) -> None:
    short = Path(short_temp_dir())  # short enough for the folder beside the file
    first, second = stores(short / "shared.db"), stores(short / "shared.db")
    await first.open()
    await second.open()
    folder = first.wakeups.folder
    assert folder == str(short / "shared.db") + ".wake"
    assert os.stat(folder).st_mode & 0o777 == 0o700

    await first.close()
    assert os.listdir(folder) == [os.path.basename(second.wakeups.path)]
    await second.close()
    assert "shared.db.wake" not in os.listdir(short)


async def test_a_long_path_uses_a_private_folder_in_the_temp_directory(
    short_temp_dir: Callable[[], str],
    stores: Callable[[Path], SQLiteStore],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    short = short_temp_dir()
    monkeypatch.setattr(tempfile, "tempdir", short)
    deep = tmp_path / ("d" * 100)
    deep.mkdir()
    (tmp_path / "link").symlink_to(deep)
    by_path, by_link = stores(deep / "shared.db"), stores(tmp_path / "link" / "shared.db")
    await by_path.open()
    await by_link.open()

    # One folder for both spellings of the file, named by a hash of its real path.
    root = Path(short) / f"shepherd-{os.getuid()}"
    assert os.path.dirname(by_path.wakeups.folder) == str(root)
    assert by_link.wakeups.folder == by_path.wakeups.folder
    assert len(os.fsencode(by_path.wakeups.path)) <= 107
    assert os.stat(root).st_mode & 0o777 == 0o700

    new_work = by_link.signals.event(ch.TASKS)
    await by_path.submit_task(new_task())
    assert await Signals.wait(new_work, PATIENCE)


async def test_a_shared_temp_folder_is_refused_and_only_the_wake_ups_are_lost(
    stores: Callable[[Path], SQLiteStore],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    (tmp_path / f"shepherd-{os.getuid()}").mkdir(mode=0o777)
    os.chmod(tmp_path / f"shepherd-{os.getuid()}", 0o777)  # the umask took bits away
    deep = tmp_path / ("d" * 100)
    deep.mkdir()
    store = stores(deep / "shared.db")

    with caplog.at_level(logging.WARNING, logger="shepherd.store.sqlite"):
        await store.open()

    assert not store.wakeups.listening
    assert "no wake-ups from other processes" in caplog.text
    assert "not a folder of this user alone" in caplog.text
    submitted = await store.submit_task(new_task())
    assert await store.get_task(submitted.task_id) is not None


async def test_a_folder_that_cannot_be_made_only_loses_the_wake_ups(
    stores: Callable[[Path], SQLiteStore],
    short_temp_dir: Callable[[], str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    short = Path(short_temp_dir())  # short enough for the folder beside the file
    (short / "shared.db.wake").write_text("not a folder")
    store = stores(short / "shared.db")

    with caplog.at_level(logging.WARNING, logger="shepherd.store.sqlite"):
        await store.open()

    assert not store.wakeups.listening
    assert "their writes are seen at the next poll" in caplog.text
    submitted = await store.submit_task(new_task())
    assert await store.get_task(submitted.task_id) is not None
