"""Static resolution: a function puts each user in a partition and names its database."""

from __future__ import annotations

import asyncio
import sys

from shepherd import App
from shepherd.errors import UnresolvedEntityError
from shepherd.governance import StaticResolver


def by_user_number(user: str) -> tuple[str, str]:
    """user-N: partition N % 4, on orders-db-1 for partitions 0 and 1, orders-db-2 otherwise."""
    partition = int(user.removeprefix("user-")) % 4
    return f"p{partition}", f"orders-db-{1 + partition // 2}"


app = App(alerts=(), resolver=StaticResolver(by_user_number))


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
