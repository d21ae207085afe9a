"""app.call: ask an agent from plain code, durably, and get its answer."""

import asyncio
from typing import Any

from shepherd import AgentRequest, App, CallFailedError, PermanentError

app = App("sqlite:///calls.db")


@app.agent("prices.quote", within=5.0)
async def quote(request: AgentRequest) -> Any:
    if request.payload == "unknown":
        raise PermanentError("no such product")
    return {"sku": request.payload, "price": 12.5}


async def main() -> None:
    async with app, app.running():
        print(await app.call("prices.quote", "A-1"))
        try:
            await app.call("prices.quote", "unknown")
        except CallFailedError as exc:
            print(exc.error["type"], "-", exc.error["message"])


asyncio.run(main())
