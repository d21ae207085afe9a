"""The event writer: one owner per event type buffers that type's events and flushes them to its CSV file.

`events.write` is an exclusive agent (`exclusive_by="type"`): at any moment one
process owns a type, and its calls reach that owner in the order they were
sent, `Batch(max_items=...)` at a time. As in the seed's `OnActivateAsync` and
`OnDeactivateAsync`, the owner opens the type's file once per ownership
(`on_acquire`) and closes it when the ownership ends (`on_release`: the type
handed back, idle for `owner_idle` seconds, moved, or the process stopping).

The owner buffers: each event is added to the key's durable owner state,
which is committed with the event's answer (its line number) in one
transaction, so an acknowledged event is durable before it is in the file.
The buffer is flushed (appended, fsynced) once it holds `MAX_ITEMS` events,
and at each tick of the type's reminder `flush` (`app.remind`, every
`FLUSH_EVERY` seconds, set by `producers.py`), so an idle type's last events
reach its file within a period though no event arrives. The file's committed
length is in the owner state too, updated with the emptied buffer in the
flush's transaction: `on_acquire` first cuts the file back to it, so a writer
killed between its flush and its commit leaves neither a partial line nor a
line twice (the buffer, still in the state, is flushed again by the next owner).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from shepherd import App, Batch, PermanentError

if TYPE_CHECKING:
    from shepherd import AgentRequest
    from shepherd.core.records import JsonValue

#: Where the CSV files go (one per event type).
FILES = Path(os.environ.get("EVENT_FILES", "events"))
#: Events written per flush, at most.
MAX_ITEMS = int(os.environ.get("EVENT_BATCH", "200"))
#: Seconds without an event after which an owner closes its file and hands the type back.
IDLE = float(os.environ.get("EVENT_IDLE", "60"))
#: Seconds between the ticks of each type's reminder, which flushes its buffered events.
FLUSH_EVERY = float(os.environ.get("EVENT_FLUSH_EVERY", "5"))

app = App(os.environ.get("SHEPHERD_STORE", "sqlite:///events.db"))

#: The open file of each type this process owns: opened by `opened`, closed by `closed`.
WRITERS: dict[str, BinaryIO] = {}


def committed(state: JsonValue) -> tuple[int, int, list[str]]:
    """A type's owner state: its file's committed length in bytes and lines, and the buffered lines."""
    state = state if isinstance(state, dict) else {}
    buffered = state.get("buffer", [])
    assert isinstance(buffered, list)
    return int(state.get("offset", 0)), int(state.get("lines", 0)), [str(b) for b in buffered]


def say(line: str) -> None:
    """Print one line whole (hooks run in threads: `print` writes the newline apart)."""
    print(f"{line}\n", end="", flush=True)


def opened(kind: str, state: JsonValue) -> None:
    """Open the type's file for this ownership, cut back to its committed length."""
    offset, _, _ = committed(state)
    FILES.mkdir(parents=True, exist_ok=True)
    path = FILES / f"{kind}.csv"
    out = path.open("ab")
    if out.tell() < offset:  # "ab" opens at the end: the file lost committed lines
        out.close()
        raise PermanentError(f"{path} is shorter than its {offset} committed bytes")
    out.truncate(offset)  # past the committed length: a flush whose commit was lost
    WRITERS[kind] = out
    say(f"opened {kind} at byte {offset}")


def closed(kind: str, state: JsonValue) -> None:
    """Close the type's file: this process no longer owns the type."""
    WRITERS.pop(kind).close()
    say(f"closed {kind} at byte {committed(state)[0]}")


@app.agent(
    "events.write",
    exclusive_by="type",
    batch=Batch(max_items=MAX_ITEMS, max_delay=0.002),
    threads=True,
    on_acquire=opened,
    on_release=closed,
    owner_idle=IDLE,
)
def write(requests: list[AgentRequest]) -> list[Any]:
    """Buffer the events of one type, each answered with its line number; flush when due.

    A reminder's tick (`request.reminder`) is one of the key's calls, in order
    with its events: it flushes whatever is buffered and is answered with None.
    """
    first = requests[0]
    kind, epoch = str(first.owner_key), int(first.owner_epoch or 0)
    offset, lines, buffered = committed(first.owner_state)
    answers: list[int | None] = []
    reminded = False
    for request in requests:
        if request.reminder is not None:
            reminded = True
            answers.append(None)
            continue
        event = request.payload
        assert isinstance(event, dict)
        buffered.append(f"{event['producer']},{event['seq']},{event['type']}")
        answers.append(lines + len(buffered))
    if buffered and (reminded or len(buffered) >= MAX_ITEMS):
        offset = flush(kind, epoch, offset, buffered)
        lines += len(buffered)
        if reminded:
            say(f"reminder: flushed {len(buffered)} events of {kind}")
        buffered = []
    first.owner_state = {"offset": offset, "lines": lines, "buffer": buffered}
    return answers


def flush(kind: str, epoch: int, offset: int, buffered: list[str]) -> int:
    """Append the buffered lines after the committed length, fsync; the file's new length."""
    fence(FILES / f"{kind}.epoch", epoch)
    out = WRITERS[kind]
    out.truncate(offset)  # a flush whose state was not stored wrote past it
    out.write("".join(f"{line}\n" for line in buffered).encode())
    out.flush()
    os.fsync(out.fileno())
    return out.tell()


def fence(path: Path, epoch: int) -> None:
    """Refuse to write for an older epoch than the newest owner's; record ours if newer.

    A stale owner (paused past its lease, not dead) would otherwise append to
    a file its successor now writes: its answers are refused by the store, but
    a plain file does not know about epochs. This check narrows that window to
    the moment between the check and the write.
    """
    newest = int(path.read_text() or 0) if path.exists() else 0
    if epoch < newest:
        raise PermanentError(f"owner epoch {epoch} is stale (the file's owner is at {newest})")
    if epoch > newest:
        path.write_text(str(epoch))
