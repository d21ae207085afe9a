"""Reminders: a journal's owner buffers its lines and flushes them when reminded."""

import asyncio
from typing import Any

from shepherd import AgentRequest, App

app = App("sqlite:///reminders.db")
flushed = asyncio.Event()


@app.agent("journal.buffer", exclusive_by="journal")
async def buffer(request: AgentRequest) -> Any:
    lines = (request.owner_state or {"lines": []})["lines"]
    if request.reminder == "flush":  # a reminder's tick: one of the key's calls
        if lines:
            print(f"{request.owner_key}: flushed {len(lines)} lines: {', '.join(lines)}")
            flushed.set()
        request.owner_state = {"lines": []}  # committed with this answer
        return None
    request.owner_state = {"lines": [*lines, request.payload["line"]]}
    return len(request.owner_state["lines"])


async def main() -> None:
    async with app, app.running():
        for line in ("opened", "paid", "shipped"):
            print(await app.call("journal.buffer", {"journal": "audit", "line": line}))
        # Every 0.5 s the key's owner, whichever process it is, gets a "flush" call.
        await app.remind("journal.buffer", "audit", "flush", every=0.5)
        await flushed.wait()
        print(await app.forget("journal.buffer", "audit", "flush"))


asyncio.run(main())
