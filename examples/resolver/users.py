"""Users live in partitions, partitions on SQLite databases: each visit is written where its user lives.

The agent opens the database its request's resolution names
(`request.resolution.resource.info["path"]`) and writes the visit there. The
store is SHEPHERD_STORE, or `shepherd.db` in the current directory; the
databases' paths are relative to the directory the worker runs in.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from typing import Any

from shepherd import AgentRequest, App, PermanentError, WorkflowContext

app = App(alerts=())

# Created when the app opens, if missing (an operator's later change is kept).
app.resource("users-db-1", kind="sqlite", info={"path": "users-1.db"})
app.resource("users-db-2", kind="sqlite", info={"path": "users-2.db"})
app.resource("users-db-3", kind="sqlite", info={"path": "users-3.db"})

CREATE = (
    "CREATE TABLE IF NOT EXISTS visits ("
    "task_id TEXT PRIMARY KEY, user TEXT NOT NULL, round INTEGER NOT NULL, "
    "partition TEXT NOT NULL, resource TEXT NOT NULL)"
)
INSERT = (
    "INSERT OR IGNORE INTO visits (task_id, user, round, partition, resource) "
    "VALUES (?, ?, ?, ?, ?)"
)


@app.agent("users.write", threads=True)
def write(request: AgentRequest) -> dict[str, str]:
    """Write the visit in the user's database; a retry of the step writes nothing twice."""
    found = request.resolution  # recorded with the step: the same on every retry
    if found is None or found.resource.kind != "sqlite":
        raise PermanentError(f"users.write needs a user on a sqlite resource, not {found}")
    path = str(found.resource.info["path"])
    with closing(sqlite3.connect(path, timeout=30.0)) as db, db:
        db.execute(CREATE)
        row = (request.task_id, found.entity, request.payload["round"], found.partition)
        db.execute(INSERT, (*row, found.resource.name))
    return {"user": found.entity, "partition": found.partition, "resource": found.resource.name}


@app.workflow("users.visit")
async def visit(ctx: WorkflowContext, data: dict[str, Any]) -> Any:
    """One visit of one user: written wherever the user lives when the step is sent."""
    return await ctx.call("users.write", data, entity=data["user"])
