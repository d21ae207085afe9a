"""Exclusive owners: one writer per account, its calls in order, a batch at a time."""

import asyncio
from typing import Any

from shepherd import AgentRequest, App, Batch

app = App("sqlite:///owners.db")


@app.agent("ledger.append", exclusive_by="account", batch=Batch(max_items=50, max_delay=0.01))
async def append(requests: list[AgentRequest]) -> list[Any]:
    first = requests[0]
    state = first.owner_state or {"balance": 0}
    results = []
    for request in requests:
        state = {"balance": state["balance"] + request.payload["amount"]}
        results.append(state["balance"])
    first.owner_state = state  # committed with these answers, in one transaction
    return results


async def main() -> None:
    async with app, app.running():
        calls = [
            app.call("ledger.append", {"account": account, "amount": amount})
            for amount in (10, -3, 5)
            for account in ("alice", "bob")
        ]
        print(await asyncio.gather(*calls))


asyncio.run(main())
