"""Where each user's visits were written, checked against the resolution each step recorded.

For each database of the app's resources: its users and the rounds of their
visits. Each row is then checked against its task's step: the resolution the
step was sent with (`shepherd show TASK` shows it) names the database the row
is in, even when the user's partition moved afterwards. Exits 1 if a row is
anywhere else.
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
from contextlib import closing
from pathlib import Path

from users import app


def visits(path: Path) -> list[tuple[str, str, int]]:
    """(task id, user, round) of each visit written in the database at `path`."""
    if not path.exists():
        return []
    with closing(sqlite3.connect(path)) as db:
        query = "SELECT task_id, user, round FROM visits ORDER BY round, user"
        return [(str(t), str(u), int(r)) for t, u, r in db.execute(query)]


def spans(rounds: set[int]) -> str:
    """Rounds as spans: `1-9, 12`."""
    out: list[str] = []
    for n in sorted(rounds):
        if out and n - 1 in rounds:
            out[-1] = f"{out[-1].split('-')[0]}-{n}"
        else:
            out.append(str(n))
    return ", ".join(out)


async def where() -> int:
    """Print each database's users and rounds; return how many rows are misplaced."""
    total, misplaced = 0, 0
    async with app:
        for resource in app.resources.values():
            path = Path(str(resource.info["path"]))
            users: dict[str, set[int]] = {}
            for task_id, user, round_ in visits(path):
                total += 1
                users.setdefault(user, set()).add(round_)
                (step,) = (await app.get_task(task_id)).steps
                recorded = step.resolution
                if recorded is None or Path(str(recorded.resource.info["path"])) != path:
                    misplaced += 1
                    print(f"task {task_id}: {user}'s visit is in {path}, its step says {recorded}")
            shown = ", ".join(
                f"{user} rounds {spans(rounds)}"
                for user, rounds in sorted(users.items(), key=lambda item: (len(item[0]), item[0]))
            )
            print(f"{path}: {shown or 'no visits'}")
    if misplaced:
        print(f"{misplaced} of {total} visits are not where their step's resolution says")
    else:
        print(f"{total} visits, each in the database its step's recorded resolution names")
    return misplaced


if __name__ == "__main__":
    sys.exit(1 if asyncio.run(where()) else 0)
