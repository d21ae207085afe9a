"""The event-writer example under a crash: exactly once, in order, keys moved (real processes).

In a copy of `examples/event_writer`, a writer process `w` (the agent role, no
producers) starts first, then four processes that each run the agent role (so
each is a writer too) and 50 producers, which send 100 events each through
`app.call` to the one writer of the event's type (8 types): 20,000 events.
Once acknowledgements flow, `w`, which owns keys then, is SIGKILLed; the
producers all finish. The writers buffer (in each type's owner state) and
flush when their buffer is full or at each tick of the type's reminder,
every second here: once no event arrives, the reminders flush what is left.
The processes' keys are leased for OWNER_LEASE seconds.

What must hold: exactly one CSV per type, with no partial or interleaved
line; every acknowledged event in its type's file exactly once, on the line
its acknowledgement gave, each producer's events of one type in send order;
and the dead process's keys were taken over by the others with their epochs
bumped (the store's lease rows); the last buffered events reached the files
with no event arriving, and a reminder flushed (the line it prints).

And the owners' life cycle: each process opens a type's file (`on_acquire`)
and closes it (`on_release`) in turn, once per ownership: the opens of a type
over all processes are its epochs (one per take; the dead one may have died
between a take and its open), the survivors reopened the dead one's types
after the kill, and once SIGTERMed every survivor had closed each file it
opened.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from shepherd import App
from shepherd.testing import wait_until
from support.files import written_lines
from support.processes import start_process, workers

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

EXAMPLE = Path(__file__).parents[2] / "examples" / "event_writer"
AGENT = "events.write"
PATIENCE = 180.0
PRODUCERS, EVENTS = 50, 100
TYPES = [f"type-{n}" for n in range(8)]
#: Seconds a key's ownership lasts unrenewed (renewed every third of it): the dead
#: writer's keys move this long after the kill (the default, 10 s, only waits longer).
OWNER_LEASE = 4.0


def acks(folder: Path, name: str) -> list[tuple[str, int, str, int]]:
    rows = [line.split(",") for line in written_lines(folder / f"acks-{name}.log")]
    return [(p, int(s), t, int(n)) for p, s, t, n in rows]


def in_files(folder: Path) -> int:
    """The lines written whole to the types' files so far."""
    return sum(len(written_lines(path)) for path in (folder / "events").glob("*.csv"))


async def test_events_are_written_exactly_once_in_order_across_a_writer_crash(
    shared_store: str, tmp_path: Path
) -> None:
    for script in ("writer.py", "producers.py"):
        shutil.copy(EXAMPLE / script, tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHEPHERD_")}
    env |= {"SHEPHERD_STORE": shared_store, "EVENT_FILES": str(tmp_path / "events")}
    env |= {"EVENT_FLUSH_EVERY": "1", "SHEPHERD_OWNER_LEASE": str(OWNER_LEASE)}
    names = ["a", "b", "c", "d"]
    argv = [sys.executable, "producers.py"]
    watcher = App(shared_store)
    async with watcher:
        with workers() as running:
            victim = start_process(
                [*argv, "w", "--producers", "0"], tmp_path, name="w", env=env, ready_timeout=60
            )
            running.append(victim)
            options = ["--producers", str(PRODUCERS), "--events", str(EVENTS)]
            for name in names:
                running.append(
                    start_process(
                        [*argv, name, *options], tmp_path, name=name, env=env, ready_timeout=60
                    )
                )
            await wait_until(
                lambda: sum(len(acks(tmp_path, n)) for n in names) >= 2000,
                timeout=PATIENCE,
                message="no acknowledgements",
            )

            async def victim_owns() -> bool:
                leases = await watcher.store.list_key_leases(AGENT)
                return any(f":{victim.pid}:" in lease.owner for lease in leases)

            keys: list[str] = []
            while not keys:  # one snapshot gives the keys, their owner and epochs
                await wait_until(victim_owns, timeout=PATIENCE, message="w owns no key")
                leases = await watcher.store.list_key_leases(AGENT)
                keys = [lease.key for lease in leases if f":{victim.pid}:" in lease.owner]
            owner = next(lease.owner for lease in leases if lease.key == keys[0])
            before = {lease.key: lease.epoch for lease in leases}
            before_kill = {n: len(w.printed()) for n, w in zip(names, running[1:], strict=True)}
            victim.kill()
            survivors = names

            async def moved() -> bool:
                now = watcher.store.now()
                leases = await watcher.store.list_key_leases(AGENT)
                return all(
                    lease.owner != owner and lease.epoch > before[lease.key] and lease.live(now)
                    for lease in leases
                    if lease.key in keys
                ) and {lease.key for lease in leases} >= set(keys)

            await wait_until(moved, timeout=PATIENCE, message=f"keys {keys} did not move")
            await wait_until(
                lambda: all(len(acks(tmp_path, n)) == PRODUCERS * EVENTS for n in survivors),
                timeout=PATIENCE,
                message="the surviving producers did not finish",
            )
            total = len(names) * PRODUCERS * EVENTS
            await wait_until(  # no event arrives any more: only the reminders flush
                lambda: in_files(tmp_path) >= total,
                timeout=PATIENCE,
                message="the reminders did not flush the last buffered events",
            )
            for worker in running:
                if worker is not victim:
                    assert worker.alive(), worker.stderr()
            for worker in running[1:]:  # all at once, then each awaited
                worker.terminate()
            for worker in running[1:]:
                assert worker.stop() == 0, worker.stderr()
            printed = {w.name: w.printed() for w in running}
            # Every ownership took its key once: a take now bumps each epoch once more.
            taken = await watcher.store.take_keys(AGENT, TYPES, owner="watcher", lease=60.0)
            epochs = {t.lease.key: t.lease.epoch - 1 for t in taken}

    assert sorted(epochs) == TYPES
    flushes = [line for lines in printed.values() for line in lines if line.startswith("remind")]
    assert flushes, "no reminder flushed a buffer"
    assert all(line.split()[:2] == ["reminder:", "flushed"] for line in flushes), flushes
    opens = dict.fromkeys(TYPES, 0)
    for name, lines in printed.items():
        for kind in TYPES:
            life = [line.split()[0] for line in lines if line.split()[1:2] == [kind]]
            opens[kind] += life.count("opened")
            # Opened and closed in turn: never two acquires, or two releases, in a row.
            assert life[::2] == ["opened"] * len(life[::2]), (name, kind, life)
            assert life[1::2] == ["closed"] * len(life[1::2]), (name, kind, life)
            if name != "w":  # stopped cleanly: every ownership released
                assert len(life) % 2 == 0, (name, kind, life)
    for kind in TYPES:
        assert epochs[kind] - 1 <= opens[kind] <= epochs[kind], (kind, opens, epochs)
    reopened = {
        line.split()[1]
        for name, start in before_kill.items()
        for line in printed[name][start:]
        if line.startswith("opened ")
    }
    assert set(keys) <= reopened, (keys, reopened)

    files = sorted((tmp_path / "events").glob("*.csv"))
    assert [f.name for f in files] == [f"type-{n}.csv" for n in range(8)]
    written: dict[tuple[str, int], tuple[str, int]] = {}
    for path in files:
        text = path.read_text()
        assert text.endswith("\n"), f"{path.name} ends with a partial line"
        last: dict[str, int] = {}
        for number, line in enumerate(text.splitlines(), start=1):
            producer, seq_text, kind = line.split(",")
            seq = int(seq_text)
            assert kind == path.stem, f"{path.name}:{number} holds an event of {kind}"
            assert (producer, seq) not in written, f"{line} written twice"
            written[(producer, seq)] = (kind, number)
            assert seq > last.get(producer, -1), f"{path.name}:{number} out of order"
            last[producer] = seq
    acknowledged = [a for n in names for a in acks(tmp_path, n)]
    assert len(acknowledged) == len(names) * PRODUCERS * EVENTS == 20000
    for producer, acked, kind, number in acknowledged:
        assert written.get((producer, acked)) == (kind, number), (producer, acked)
