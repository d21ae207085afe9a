"""The overview page: tasks per state, the last hour's throughput, open alerts, breakers, leader, workers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shepherd.core.states import ProcessState
from shepherd.core.workers import WorkerState
from shepherd.dashboard.chart import chart
from shepherd.dashboard.pages import live_part, render

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from shepherd.operations import Operations

__all__ = ["overview", "overview_context"]

#: Open alerts shown on the overview (the newest); it counts them all and links to `/alerts`.
ALERTS_SHOWN = 20


async def overview_context(ops: Operations) -> dict[str, Any]:
    """What the overview shows, read from the store now."""
    counts = await ops.count_tasks()
    now = ops.now()
    ttl = ops.settings.worker_ttl
    workers = [(w, w.state(now=now, ttl=ttl)) for w in await ops.workers()]
    workers.sort(key=lambda pair: (pair[1] is not WorkerState.ALIVE, pair[0].instance))
    return {
        "counts": [(state.value, counts.get(state, 0)) for state in ProcessState],
        "total": sum(counts.values()),
        "chart": chart(await ops.throughput()),
        "alerts": await ops.alerts(open_only=True, limit=ALERTS_SHOWN),
        "open_alerts": await ops.count_alerts(state="open"),
        "breakers": await ops.breakers(),
        "leader": await ops.leader(),
        "workers": workers,
    }


async def overview(request: Request) -> Response:
    """GET /: the overview page (its live part refreshes over /live/overview)."""
    ops: Operations = request.app.state.guard.operations
    live = live_part(request, "overview_live.html", **await overview_context(ops))
    return render(request, "overview.html", live=live)
