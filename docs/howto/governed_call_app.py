"""app.call governed like a step: its entity's resource and capacity, a breaker that fails fast."""

import asyncio
import logging
import sys
from typing import Any

from shepherd import (
    AgentRequest,
    App,
    BreakerPolicy,
    CallFailedError,
    RetryPolicy,
    TransientError,
)

logging.basicConfig(format="%(levelname)s %(name)s: %(message)s", stream=sys.stdout)
app = App("sqlite:///governed.db")
app.resource("orders-eu", kind="sqlite", info={"path": "orders-eu.db"}, capacity=2)
using = most = 0


@app.agent("orders.write")  # no resource=: the resource of the call's entity
async def write(request: AgentRequest) -> Any:
    global using, most
    using += 1
    most = max(most, using)
    await asyncio.sleep(0.05)  # the write itself
    using -= 1
    where = request.resolution
    return None if where is None else where.resource.info["path"]


@app.agent(
    "payments.charge",
    breaker=BreakerPolicy(failure_threshold=3, cool_down=60.0),
    retry=RetryPolicy(max_attempts=10, initial_delay=0.01, max_delay=0.01),
)
async def charge(request: AgentRequest) -> Any:
    raise TransientError("the payment service is down")


async def main() -> None:
    async with app, app.running():
        await app.operations.move_partition("eu", "orders-eu")
        await app.operations.assign_entity("user-42", "eu")
        calls = [app.call("orders.write", {"n": n}, entity="user-42") for n in range(6)]
        paths = await asyncio.gather(*calls)
        print(f"6 writes to {sorted(set(paths))}, at most {most} at once")
        for n in range(2):
            try:
                await app.call("payments.charge", {"n": n})
            except CallFailedError as exc:
                print(exc.error["type"])


asyncio.run(main())
