"""W5, the event writer: producers `app.call` exclusive writers that append to CSV files.

The seed's EventProcessor -> EventWriter, in one process: `producers` tasks
each send their share of the events, one `app.call` at a time, to the agent
`w5.write` (`exclusive_by="type"`, 8 types); its owner opens `<type>.csv` once
per ownership (`on_acquire`, cut back to the committed length; closed by
`on_release`), appends each handling's lines, fsyncs, and keeps the file's
length as the key's owner state. Run twice on fresh stores: with `Batch(max_items=200)` and without
batching (one call per handling), the second with a tenth of the events.
Reported: acknowledged events per second, store commits per event, and
whether every acknowledged event is in its file exactly once.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, final

from shepherd.app import App
from shepherd.governance.batch import Batch

if TYPE_CHECKING:
    from shepherd.agents.request import AgentRequest
    from shepherd.core.records import JsonValue

__all__ = ["EventWriterResult", "WriterRun", "run_event_writer"]

#: The agent of each run (a key's owner state belongs to its agent: a second run on
#: the same PostgreSQL database must not read the first one's file lengths).
AGENT = "w5.write"
KEYS = 8
#: Events per flush when batching.
MAX_ITEMS = 200
#: The unbatched run sends this fraction of the events (it is much slower).
UNBATCHED_SHARE = 10


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class WriterRun:
    """One run of W5: batched or not."""

    batched: bool
    events: int
    seconds: float
    events_per_s: float
    #: Store commits (group-committed transactions) per acknowledged event.
    commits_per_event: float
    #: Acknowledged events missing from the files, or written twice.
    lost: int
    duplicated: int
    store_stats: dict[str, float] = field(default_factory=dict)


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class EventWriterResult:
    """W5: the batched and the unbatched runs, and their ratio."""

    workload: str
    producers: int
    keys: int
    max_items: int
    batched: WriterRun
    unbatched: WriterRun
    #: Batched events/s over unbatched events/s.
    speedup: float

    @property
    def tasks_lost(self) -> int:
        return self.batched.lost + self.unbatched.lost


def _agent(batched: bool) -> str:
    return f"{AGENT}.{'batched' if batched else 'one'}"


def _writer_app(store: str, folder: Path, *, batched: bool, settings: dict[str, Any]) -> App:
    app = App(store, **settings)
    folder.mkdir(parents=True, exist_ok=True)
    #: The open file of each type this app owns.
    files: dict[str, BinaryIO] = {}

    def offset_of(state: JsonValue) -> int:
        return int(state.get("offset", 0)) if isinstance(state, dict) else 0

    def opened(key: str, state: JsonValue) -> None:
        out = (folder / f"{key}.csv").open("ab")
        out.truncate(offset_of(state))
        files[key] = out

    def closed(key: str, state: JsonValue) -> None:
        files.pop(key).close()

    def write(requests: list[AgentRequest]) -> list[JsonValue]:
        first = requests[0]
        out = files[str(first.owner_key)]
        out.truncate(offset_of(first.owner_state))  # past it: answers that were not stored
        for request in requests:
            event = request.payload
            assert isinstance(event, dict)
            out.write(f"{event['producer']},{event['seq']}\n".encode())
        out.flush()
        os.fsync(out.fileno())
        first.owner_state = {"offset": out.tell()}
        return [None] * len(requests)

    if batched:
        app.agent(
            _agent(batched),
            exclusive_by="type",
            batch=Batch(max_items=MAX_ITEMS, max_delay=0.002),
            threads=True,
            on_acquire=opened,
            on_release=closed,
        )(write)
    else:

        def write_one(request: AgentRequest) -> JsonValue:
            return write([request])[0]

        app.agent(
            _agent(batched), exclusive_by="type", threads=True, on_acquire=opened, on_release=closed
        )(write_one)
    return app


async def _run(
    store: str, folder: Path, *, batched: bool, events: int, producers: int, budget: float,
    settings: dict[str, Any],
) -> WriterRun:  # fmt: skip
    app = _writer_app(store, folder, batched=batched, settings=settings)
    acked: list[tuple[int, int]] = []
    agent = _agent(batched)
    per_producer = max(events // producers, 1)

    async def produce(p: int) -> None:
        for seq in range(per_producer):
            event = {"type": f"type-{(p + seq) % KEYS}", "producer": p, "seq": seq}
            await app.call(agent, event, timeout=budget)
            acked.append((p, seq))

    async with app, app.running(["agent"]):
        began = time.perf_counter()
        await asyncio.wait_for(asyncio.gather(*(produce(p) for p in range(producers))), budget)
        seconds = time.perf_counter() - began
        stats = app.store.statistics()
    written = _written(folder)
    n = len(acked)
    return WriterRun(
        batched=batched,
        events=n,
        seconds=seconds,
        events_per_s=n / seconds if seconds > 0 else 0.0,
        commits_per_event=float(stats.get("commits", 0)) / n if n else 0.0,
        lost=sum(1 for a in acked if a not in written),
        duplicated=sum(1 for count in written.values() if count > 1),
        store_stats=stats,
    )


def _written(folder: Path) -> dict[tuple[int, int], int]:
    """How many times each (producer, seq) is in the CSV files (read once the run is over)."""
    written: dict[tuple[int, int], int] = {}
    for path in folder.glob("*.csv"):
        for line in path.read_text().splitlines():
            producer, seq = (int(v) for v in line.split(","))
            written[(producer, seq)] = written.get((producer, seq), 0) + 1
    return written


async def run_event_writer(
    store_of: Any, tmp: Path, *, events: int, producers: int, budget: float,
    settings: dict[str, Any],
) -> EventWriterResult:  # fmt: skip
    """W5: the batched run of `events` events, then the unbatched one of a tenth of them.

    `store_of(name)` gives each run's store URL (a fresh SQLite file, or the
    given PostgreSQL database, which then holds both runs' calls).
    """
    batched = await _run(
        store_of("w5-batched"), tmp / "w5-batched", batched=True, events=events,
        producers=producers, budget=budget, settings=settings,
    )  # fmt: skip
    unbatched = await _run(
        store_of("w5-unbatched"), tmp / "w5-unbatched", batched=False,
        events=max(events // UNBATCHED_SHARE, producers), producers=producers, budget=budget,
        settings=settings,
    )  # fmt: skip
    speedup = batched.events_per_s / unbatched.events_per_s if unbatched.events_per_s else 0.0
    return EventWriterResult(
        workload="W5",
        producers=producers,
        keys=KEYS,
        max_items=MAX_ITEMS,
        batched=batched,
        unbatched=unbatched,
        speedup=speedup,
    )
