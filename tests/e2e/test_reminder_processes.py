"""A reminder every second across real processes, the key's owner SIGKILLed while it fires.

Two processes run the agent and supervisor roles of `support.reminder_worker`;
the test sets a reminder every second on one key and keeps sending that key
plain calls, one after another. Once the reminder has been handled twice, the
process owning the key is SIGKILLed.

What must hold: the reminder keeps firing under the other process; no two
handlings of the key overlapped (reminders and calls alike), but for the dead
process's last one, cut by the kill; and no tick was handled twice: the ticks
committed with the answers (the owner state) rise strictly, and so do the
ticks handled by each process.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

from shepherd.testing import wait_until
from support import reminder_worker
from support.files import written_lines
from support.processes import spawn_worker, workers
from support.reminder_worker import AGENT, build_app

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

PATIENCE = 60.0
SCRIPT = Path(reminder_worker.__file__)
KEY = "csv"


def events(log: Path) -> list[tuple[str, int, str, float]]:
    """(event, pid, what, tick) of every line so far; a kill line has what "" and tick 0."""
    out = []
    for line in written_lines(log):
        event, pid, *rest = line.split()
        what, tick = rest if rest else ("", "0")
        out.append((event, int(pid), what, float(tick)))
    return out


def reminded(log: Path, *, pid: int | None = None, after_kill: bool = False) -> list[float]:
    """The ticks of the reminder's handlings ended (by `pid`; after the kill line)."""
    seen = events(log)
    if after_kill:
        kills = [n for n, e in enumerate(seen) if e[0] == "kill"]
        seen = seen[kills[0] + 1 :] if kills else []
    return [t for e, p, w, t in seen if e == "end" and w == "flush" and pid in (None, p)]


def check_one_at_a_time(log: Path, victim: int) -> None:
    """Assert that no two handlings of the key overlapped, but for the victim's cut one."""
    running: tuple[int, str, float] | None = None
    killed = False
    for event, pid, what, tick in events(log):
        if event == "kill":
            killed = True
            if running is not None and running[0] == victim:
                running = None
            continue
        assert not (killed and pid == victim), "the dead process handled after the kill"
        if event == "start":
            assert running is None, f"{what} {tick} started while {running} ran"
            running = (pid, what, tick)
        else:
            assert running == (pid, what, tick)
            running = None
    assert killed


async def test_a_reminder_keeps_firing_once_per_tick_under_the_next_owner(
    shared_store: str, tmp_path: Path
) -> None:
    log = tmp_path / "handlings.log"
    app = build_app(shared_store)
    async with app:
        with workers() as running:
            for name in ("a", "b"):
                running.append(
                    spawn_worker(shared_store, tmp_path, name=name, script=SCRIPT, log_path=log)
                )
            await app.remind(AGENT, KEY, "flush", {"why": "idle"}, every=1.0)

            async def send_calls() -> None:
                n = 0
                while True:
                    await app.call(AGENT, {"type": KEY, "n": n}, timeout=PATIENCE)
                    n += 1

            sender = asyncio.create_task(send_calls())
            try:
                await wait_until(
                    lambda: len(reminded(log)) >= 2, timeout=PATIENCE, message="no reminders"
                )
                (lease,) = await app.store.list_key_leases(AGENT)
                (victim,) = [w for w in running if f":{w.pid}:" in lease.owner]
                victim.kill()
                with log.open("a") as out:
                    out.write(f"kill {victim.pid}\n")
                (survivor,) = [w.pid for w in running if w is not victim]
                await wait_until(
                    lambda: len(reminded(log, pid=survivor, after_kill=True)) >= 3,
                    timeout=PATIENCE,
                    message="the reminder did not fire under the next owner",
                )
                assert await app.forget(AGENT, KEY, "flush") is True
            finally:
                sender.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await sender
            calls = [e for e in events(log) if e[0] == "end" and e[2] == "call"]
        # Every process is dead now: the key's owner state is what its last answer committed.

        async def taken() -> bool:
            return bool(await app.store.take_keys(AGENT, [KEY], owner="test", lease=60.0))

        await wait_until(taken, timeout=PATIENCE, message="the key's lease never lapsed")
        (key,) = await app.store.take_keys(AGENT, [KEY], owner="test", lease=60.0)

    check_one_at_a_time(log, victim.pid)
    assert len(calls) > 2
    committed = key.state["ticks"] if isinstance(key.state, dict) else None
    assert isinstance(committed, list)
    assert committed == sorted(set(committed)), committed  # no tick twice, in order
    for pid in (victim.pid, survivor):
        ticks = reminded(log, pid=pid)
        assert ticks == sorted(set(ticks)), (pid, ticks)
    # The last handling's answer may have been cut by the end of the test.
    assert set(reminded(log, pid=survivor, after_kill=True)[:-1]) <= set(committed)
