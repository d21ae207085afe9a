"""W7, steps through an exclusive owner: one-step workflows whose step a batching owner handles.

Each workflow makes one step, `ctx.call` to an agent exclusive by `key` (8
keys, the workflows spread over them in turn); the key's owner handles the
key's steps in the order they reached it, a batch at a time
(`Batch(max_items=200, max_delay=0.002)`): as W5's writer, it appends one line
per step to the key's file (opened once per ownership by `on_acquire`, cut
back to the committed length, closed by `on_release`), fsyncs it, keeps the
file's length as the key's owner state (committed with the batch's replies)
and answers each step with its own item. With `fsync=False` the owner writes
nothing: what is left is the store's cost of a handling. Then the same workload on a fresh store (or, on
PostgreSQL, under other names) through the same exclusive agent without
`batch=`: one step per handling. Every role runs in this process. For
reference, last, the same workflows through a plain agent that does nothing
(no owner, no file): what a one-step workflow costs the engine itself, which a
step through an owner cannot go below.

A workflow checks that its step's reply is its own item's (otherwise it
raises and ends in `error`, which counts as lost). Reported: workflows per
second from the roles' start until every task has ended, store commits per
workflow (submission and run), and the handlings the owners made.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, final

from shepherd.app import App
from shepherd.bench.counts import commits, per
from shepherd.bench.measure import Polls, terminal, wait_until
from shepherd.core.states import ProcessState
from shepherd.governance.batch import Batch

if TYPE_CHECKING:
    from shepherd.agents.request import AgentRequest
    from shepherd.core.records import JsonValue
    from shepherd.scheduler import WorkflowContext

__all__ = ["OwnedResult", "OwnedRun", "run_owned"]

KEYS = 8
MAX_ITEMS = 200
MAX_DELAY = 0.002
#: Workflows submitted per transaction-sharing wave (as `flow.submit_all`).
_CHUNK = 1000


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class OwnedRun:
    """One run of W7: batched or not (or, with `plain`, through a plain agent that does nothing)."""

    batched: bool
    plain: bool
    n: int
    seconds: float
    workflows_per_s: float
    processed: int
    tasks_lost: int
    #: Handler invocations, and the steps they handled (more than `n`: a step handled twice).
    handlings: int
    items: int
    biggest_batch: int
    #: With the files: processed steps whose line is not in their key's file, and lines there twice.
    missing_lines: int
    lines_twice: int
    #: Store commits (group-committed transactions) of the submission and the run, per workflow.
    commits_per_workflow: float
    store_stats: dict[str, float] = field(default_factory=dict)


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class OwnedResult:
    """W7: the batched and the unbatched runs, and their ratio."""

    workload: str
    n: int
    keys: int
    #: Whether each handling appended its lines to the key's file and fsynced it.
    fsync: bool
    max_items: int
    max_delay_s: float
    batched: OwnedRun
    unbatched: OwnedRun
    #: Batched workflows/s over unbatched workflows/s.
    speedup: float
    #: The same workflows through a plain agent that does nothing (no owner): the reference.
    plain: OwnedRun

    @property
    def tasks_lost(self) -> int:
        """Tasks not processed, and processed steps whose line is not in its file (exit 1)."""
        runs = (self.batched, self.unbatched, self.plain)
        return sum(run.tasks_lost + run.missing_lines for run in runs)


@dataclass
class _Tally:
    handlings: int = 0
    items: int = 0
    biggest: int = 0


def _names(batched: bool, plain: bool = False) -> tuple[str, str]:
    """The run's workflow and agent (apart, so that the runs can share a PostgreSQL database)."""
    mode = "plain" if plain else "batched" if batched else "one"
    return f"w7.order.{mode}", f"w7.ledger.{mode}"


def _offset(state: JsonValue) -> int:
    return int(state.get("offset", 0)) if isinstance(state, dict) else 0


def _app(
    store: str,
    folder: Path | None,
    *,
    batched: bool,
    tally: _Tally,
    settings: dict[str, Any],
    plain: bool = False,
) -> App:
    """The run's app; the owner writes to files in `folder`, or nothing when it is None."""
    app = App(store, alerts=(), **settings)
    workflow, agent = _names(batched, plain)
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
    files: dict[str, BinaryIO] = {}

    def opened(key: str, state: JsonValue) -> None:
        if folder is not None:
            out = (folder / f"{key}.csv").open("ab")
            out.truncate(_offset(state))
            files[key] = out

    def closed(key: str, _state: JsonValue) -> None:
        if folder is not None:
            files.pop(key).close()

    def handle(requests: list[AgentRequest]) -> list[JsonValue]:
        tally.handlings += 1
        tally.items += len(requests)
        tally.biggest = max(tally.biggest, len(requests))
        items: list[JsonValue] = [request.payload["i"] for request in requests]
        first = requests[0]
        if folder is not None:
            out = files[str(first.owner_key)]
            out.truncate(_offset(first.owner_state))  # past it: replies that were not stored
            out.write("".join(f"{i}\n" for i in items).encode())
            out.flush()
            os.fsync(out.fileno())
            first.owner_state = {"offset": out.tell()}
        return items

    hooks: dict[str, Any] = {"on_acquire": opened, "on_release": closed, "threads": True}
    if plain:

        @app.agent(agent)
        async def nothing(request: AgentRequest) -> JsonValue:
            tally.handlings += 1
            tally.items += 1
            tally.biggest = 1
            return request.payload["i"]

    elif batched:
        batch = Batch(max_items=MAX_ITEMS, max_delay=MAX_DELAY)
        app.agent(agent, exclusive_by="key", batch=batch, **hooks)(handle)
    else:

        def handle_one(request: AgentRequest) -> JsonValue:
            return handle([request])[0]

        app.agent(agent, exclusive_by="key", **hooks)(handle_one)

    @app.workflow(workflow)
    async def order(ctx: WorkflowContext, data: JsonValue) -> JsonValue:
        assert isinstance(data, dict)
        reply = await ctx.call(agent, data)
        if reply != data["i"]:
            raise RuntimeError(f"step {data['i']} was answered {reply!r}")
        return reply

    return app


async def _run(
    store: str, folder: Path | None, *, batched: bool, n: int, budget: float,
    settings: dict[str, Any], plain: bool = False,
) -> OwnedRun:  # fmt: skip
    tally = _Tally()
    workflow, _ = _names(batched, plain)
    app = _app(store, folder, batched=batched, tally=tally, settings=settings, plain=plain)
    async with app:
        before = await app.store.count_tasks()
        target = terminal(before) + n
        processed_before = before.get(ProcessState.PROCESSED, 0)
        for start in range(0, n, _CHUNK):
            await asyncio.gather(
                *(
                    app.submit(workflow, {"key": f"key-{i % KEYS}", "i": i})
                    for i in range(start, min(n, start + _CHUNK))
                )
            )
        ready = asyncio.Event()
        roles = asyncio.create_task(app.run(ready=ready.set), name="bench-w7-roles")
        await ready.wait()
        began = time.perf_counter()
        last = await wait_until(
            app.store,
            lambda c: terminal(c) >= target,
            deadline=time.monotonic() + budget,
            alive=roles,
            polls=Polls(),
        )
        seconds = time.perf_counter() - began
        roles.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await roles
        stats = dict(app.store.statistics())
    if terminal(last) < target:
        print(f"W7: not all {n} workflows ended within {budget:g}s", file=sys.stderr)
    processed = last.get(ProcessState.PROCESSED, 0) - processed_before
    lines = _lines(folder) if folder is not None else {}
    return OwnedRun(
        batched=batched,
        plain=plain,
        n=n,
        seconds=seconds,
        workflows_per_s=n / seconds if seconds > 0 else 0.0,
        processed=processed,
        tasks_lost=n - processed,
        handlings=tally.handlings,
        items=tally.items,
        biggest_batch=tally.biggest,
        missing_lines=0 if folder is None else sum(1 for i in range(n) if i not in lines),
        lines_twice=sum(1 for count in lines.values() if count > 1),
        commits_per_workflow=per(commits(stats), n),
        store_stats=stats,
    )


def _lines(folder: Path) -> dict[int, int]:
    """How many times each item is in the keys' files (read once the run is over)."""
    seen: dict[int, int] = {}
    for path in folder.glob("*.csv"):
        for line in path.read_text().splitlines():
            seen[int(line)] = seen.get(int(line), 0) + 1
    return seen


async def run_owned(
    store_of: Any, tmp: Path, *, n: int, fsync: bool, budget: float, settings: dict[str, Any]
) -> OwnedResult:
    """W7: `n` workflows through the batching owner, then `n` through the unbatched one.

    `store_of(name)` gives each run's store URL (a fresh SQLite file, or the
    given PostgreSQL database, which then holds both runs' tasks); the owners'
    files go under `tmp` (none without `fsync`).
    """
    runs = []
    for batched, name in ((True, "w7-batched"), (False, "w7-unbatched")):
        folder = tmp / name if fsync else None
        runs.append(
            await _run(
                store_of(name), folder, batched=batched, n=n, budget=budget, settings=settings
            )
        )
    batched_run, unbatched = runs
    plain = await _run(
        store_of("w7-plain"), None, batched=False, n=n, budget=budget, settings=settings, plain=True
    )
    speedup = (
        batched_run.workflows_per_s / unbatched.workflows_per_s
        if unbatched.workflows_per_s
        else 0.0
    )
    return OwnedResult(
        workload="W7",
        n=n,
        keys=KEYS,
        fsync=fsync,
        max_items=MAX_ITEMS,
        max_delay_s=MAX_DELAY,
        batched=batched_run,
        unbatched=unbatched,
        speedup=speedup,
        plain=plain,
    )
