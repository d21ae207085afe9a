"""While roles run, the collector's first threshold is `gc_threshold`; afterwards, as before.

The process's collector is the same whatever the store: on SQLite only.
"""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING, Any

from shepherd import App
from support.backends import sqlite_only

if TYPE_CHECKING:
    from shepherd.agents import AgentRequest

PATIENCE = 30.0


@sqlite_only()
async def test_roles_run_with_the_raised_threshold(app: App) -> None:
    seen: list[int] = []

    @app.agent("gc.look")
    async def look(request: AgentRequest) -> int:
        seen.append(gc.get_threshold()[0])
        return 1

    @app.workflow("gc.flow")
    async def flow(ctx: Any, payload: Any) -> Any:
        return await ctx.call("gc.look", payload)

    threshold = app.settings.gc_threshold
    assert threshold is not None
    before = gc.get_threshold()
    assert before[0] < threshold  # the interpreter's default, 700
    async with app.running():
        task_id = await app.submit("gc.flow", {})
        assert await app.result(task_id, timeout=PATIENCE) == 1
    assert seen == [threshold]
    assert gc.get_threshold() == before
