"""The event writer: one owner per event type appends that type's events to its CSV file.

`events.write` is an exclusive agent (`exclusive_by="type"`): at any moment one
process owns a type, and its calls reach that owner in the order they were
sent, `Batch(max_items=...)` at a time. As in the seed's `OnActivateAsync` and
`OnDeactivateAsync`, the owner opens the type's file once per ownership
(`on_acquire`) and closes it when the ownership ends (`on_release`: the type
handed back, idle for `owner_idle` seconds, moved, or the process stopping).

Each batch's lines are appended and fsynced before it is answered. The file's
committed length is the key's durable owner state, committed with the batch's
answers in one transaction: `on_acquire` first cuts the file back to it, so a
writer killed between its write and its commit leaves neither a partial line
nor a line whose caller was never answered (that caller's call is written
again, once).
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

app = App(os.environ.get("SHEPHERD_STORE", "sqlite:///events.db"))

#: The open file of each type this process owns: opened by `opened`, closed by `closed`.
WRITERS: dict[str, BinaryIO] = {}


def committed(state: JsonValue) -> tuple[int, int]:
    """The committed length of a type's file, in bytes and lines, from its owner state."""
    state = state if isinstance(state, dict) else {}
    return int(state.get("offset", 0)), int(state.get("lines", 0))


def say(line: str) -> None:
    """Print one line whole (hooks run in threads: `print` writes the newline apart)."""
    print(f"{line}\n", end="", flush=True)


def opened(kind: str, state: JsonValue) -> None:
    """Open the type's file for this ownership, cut back to its committed length."""
    offset, _ = committed(state)
    FILES.mkdir(parents=True, exist_ok=True)
    path = FILES / f"{kind}.csv"
    out = path.open("ab")
    if out.tell() < offset:  # "ab" opens at the end: the file lost committed lines
        out.close()
        raise PermanentError(f"{path} is shorter than its {offset} committed bytes")
    out.truncate(offset)  # anything past the committed length was never acknowledged
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
    """Append the events of one type, fsync, and return each event's line number."""
    first = requests[0]
    kind, epoch = str(first.owner_key), int(first.owner_epoch or 0)
    offset, lines = committed(first.owner_state)
    fence(FILES / f"{kind}.epoch", epoch)
    out = WRITERS[kind]
    out.truncate(offset)  # a handling whose answers were not stored wrote past it
    for request in requests:
        event = request.payload
        assert isinstance(event, dict)
        out.write(f"{event['producer']},{event['seq']},{event['type']}\n".encode())
    out.flush()
    os.fsync(out.fileno())
    first.owner_state = {"offset": out.tell(), "lines": lines + len(requests)}
    return [lines + n + 1 for n in range(len(requests))]


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
