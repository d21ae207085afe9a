"""The event writer: one owner per event type appends that type's events to its CSV file.

`events.write` is an exclusive agent (`exclusive_by="type"`): at any moment one
process owns a type, and its calls reach that owner in the order they were
sent, `Batch(max_items=...)` at a time. The owner appends the batch's lines to
`<type>.csv` and fsyncs before it answers. The file's committed length is the
key's durable owner state, committed with the batch's answers in one
transaction: a new owner first cuts the file back to it, so a writer killed
between its write and its commit leaves neither a partial line nor a line
whose caller was never answered (that caller's call is written again, once).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shepherd import App, Batch, PermanentError

if TYPE_CHECKING:
    from shepherd import AgentRequest

#: Where the CSV files go (one per event type).
FILES = Path(os.environ.get("EVENT_FILES", "events"))
#: Events written per flush, at most.
MAX_ITEMS = int(os.environ.get("EVENT_BATCH", "200"))

app = App(os.environ.get("SHEPHERD_STORE", "sqlite:///events.db"))


@app.agent(
    "events.write",
    exclusive_by="type",
    batch=Batch(max_items=MAX_ITEMS, max_delay=0.002),
    threads=True,
)
def write(requests: list[AgentRequest]) -> list[Any]:
    """Append the events of one type, fsync, and return each event's line number."""
    first = requests[0]
    kind, epoch = str(first.owner_key), int(first.owner_epoch or 0)
    state = first.owner_state if isinstance(first.owner_state, dict) else {}
    offset, lines = int(state.get("offset", 0)), int(state.get("lines", 0))
    FILES.mkdir(parents=True, exist_ok=True)
    fence(FILES / f"{kind}.epoch", epoch)
    path = FILES / f"{kind}.csv"
    with path.open("ab") as out:
        if out.tell() < offset:  # "ab" opens at the end: the file lost committed lines
            raise PermanentError(f"{path} is shorter than its {offset} committed bytes")
        out.truncate(offset)  # anything past the committed length was never acknowledged
        out.seek(offset)
        for request in requests:
            event = request.payload
            assert isinstance(event, dict)
            out.write(f"{event['producer']},{event['seq']},{event['type']}\n".encode())
        out.flush()
        os.fsync(out.fileno())
        end = out.tell()
    first.owner_state = {"offset": end, "lines": lines + len(requests)}
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
