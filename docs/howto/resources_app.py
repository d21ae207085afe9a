"""Users live in partitions, partitions on databases: resolve a few users and print where."""

from __future__ import annotations

import asyncio
import sys

from shepherd import App
from shepherd.errors import UnresolvedEntityError

app = App(alerts=())  # the store: SHEPHERD_STORE, or shepherd.db here

# Created when the app opens, if missing; an operator's later change is kept.
app.resource("orders-db-1", kind="sqlite", info={"path": "orders-1.db"}, capacity=3)
app.resource("orders-db-2", kind="sqlite", info={"path": "orders-2.db"}, capacity=3)


async def main(users: list[str]) -> None:
    async with app:
        for user in users:
            try:
                found = await app.resolver.resolve(user)
            except UnresolvedEntityError as exc:
                print(exc)
                continue
            print(
                f"{user}: partition {found.partition}, {found.resource.name} {found.resource.info}"
            )


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
