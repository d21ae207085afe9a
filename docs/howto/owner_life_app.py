"""Owners with a life cycle: each account's journal is opened once per ownership."""

import asyncio
from typing import Any, TextIO

from shepherd import AgentRequest, App

app = App("sqlite:///journal.db")
journals: dict[str, TextIO] = {}


def opened(account: str, state: Any) -> None:  # a plain def runs in a thread
    journals[account] = open(f"journal-{account}.txt", "a")
    print(f"opened {account}'s journal, state {state}")


def closed(account: str, state: Any) -> None:
    journals.pop(account).close()
    print(f"closed {account}'s journal, state {state}")


@app.agent(
    "journal.append",
    exclusive_by="account",
    on_acquire=opened,
    on_release=closed,
    owner_idle=0.2,
)
async def append(request: AgentRequest) -> int:
    entries = (request.owner_state or {"entries": 0})["entries"] + 1
    journals[str(request.owner_key)].write(f"{request.payload['text']}\n")
    request.owner_state = {"entries": entries}  # committed with the answer
    return entries


async def main() -> None:
    async with app, app.running(["agent"]):
        for text in ("opened", "paid"):
            print(await app.call("journal.append", {"account": "alice", "text": text}))
        await asyncio.sleep(1)  # idle past owner_idle: the journal is closed, the key handed back
        print(await app.call("journal.append", {"account": "alice", "text": "refunded"}))
    # The roles stopped: the last ownership was released too.


asyncio.run(main())
