"""`ctx.wait_for(name, timeout=...)`: a workflow waits for a signal holding no claim and no slot.

`core.signalling` decides from the step recorded at the wait's seq; a wait
with no outcome yet asks the store (`WaitSignal`), in ONE transaction that
also carries the replies this workflow went on with before their commit
(`scheduler.replied`, as a sleep does): the oldest signal of the name is
consumed and returned, or the timeout has passed (`SignalTimeoutError`), or the
wait is recorded and the claim given up. The run then stops (`Waiting`); a
signal (`app.signal`) makes the task claimable at once, the timeout makes it
claimable then, and the replayed workflow finds the wait's outcome recorded.

Refused, with nothing stored (`ConfigError`, or `PayloadError` for the name): an
empty name or one over `MAX_NAME_BYTES`; a negative, NaN, infinite or overlong
timeout; a wait outside its workflow's run (plain code, or an agent's handler
that got hold of a context); a wait while another call or wait of the workflow
is in flight (`asyncio.gather`: two waits at once are both refused).
"""

from __future__ import annotations

import asyncio
import weakref
from contextvars import ContextVar
from typing import TYPE_CHECKING

from shepherd.core import signalling
from shepherd.core.replay import NonDeterminism
from shepherd.core.signalling import MAX_NAME_BYTES, Received, TimedOut
from shepherd.errors import (
    ConfigError,
    NonDeterminismError,
    PayloadError,
    SignalTimeoutError,
    StaleEpochError,
    StoreUnavailableError,
)
from shepherd.payloads import check_text
from shepherd.scheduler import replied
from shepherd.scheduler.stops import Abandoned, StoreLost
from shepherd.store.ops import Waited, WaitSignal
from shepherd.tasklog import task_event

if TYPE_CHECKING:
    from datetime import datetime

    from shepherd.agents.pending import PendingReply
    from shepherd.core.records import JsonValue
    from shepherd.core.signalling import Signal
    from shepherd.scheduler.parts import SchedulerParts
    from shepherd.scheduler.sleeping import Sleeper

__all__ = ["Waiting", "checked_name", "entered", "wait_for"]

#: The context of the workflow run of the current asyncio task (inherited by the
#: tasks it starts, as `asyncio.gather` does), or None outside any run.
_RUN: ContextVar[object | None] = ContextVar("shepherd_workflow_run", default=None)
#: Per context, the asyncio tasks inside `wait_for` now, and those told of a clash.
_WAITS: weakref.WeakKeyDictionary[object, tuple[set[asyncio.Task[object]], set[object]]] = (
    weakref.WeakKeyDictionary()
)


class Waiting(Abandoned):
    """The task waits for a signal: its claim is given up, so this run stops here."""


def entered(ctx: object) -> None:
    """Mark `ctx` as the workflow run of the current asyncio task (and those it starts)."""
    _RUN.set(ctx)


def refuse_outside(ctx: object, what: str) -> None:
    """Refuse `what` (a context's wait or child) outside `ctx`'s own run.

    Raises:
        ConfigError: The current asyncio task is not `ctx`'s run nor one it
            started (plain code holding the context, an agent's handler).
    """
    if _RUN.get() is not ctx:
        raise ConfigError(
            what,
            f"{what} outside its workflow's run is refused: call it from the workflow "
            "function (or a branch it awaits), not from plain code or an agent's handler",
        )


def checked_name(name: object) -> str:
    """A signal's name: a non-empty str of at most MAX_NAME_BYTES bytes of UTF-8.

    Raises:
        PayloadError: It is not; the message says why.
    """
    check_text("signal name", name, limit=MAX_NAME_BYTES)
    if not isinstance(name, str) or not name.strip():
        raise PayloadError(f"signal name must be a non-empty str, not {name!r}")
    return name


async def wait_for(
    ctx: Sleeper, parts: SchedulerParts, seq: int, name: object, seconds: object
) -> JsonValue:
    """`ctx.wait_for(name, timeout=seconds)` at `seq`: the signal's payload.

    Raises:
        SignalTimeoutError: The timeout passed before a signal of `name` came.
        ConfigError: `seconds` is refused, or the wait is not allowed here.
        PayloadError: `name` is refused.
    """
    checked = checked_name(name)
    try:
        timeout_at = signalling.timeout_at_after(seconds, now=parts.store.now())
    except ValueError as exc:
        raise ConfigError("timeout", str(exc)) from None
    refuse_outside(ctx, "ctx.wait_for")
    me = asyncio.current_task()
    assert me is not None  # a workflow run is an asyncio task
    waits, clashed = _WAITS.setdefault(ctx, (set(), set()))
    _refuse_beside(ctx, me, waits, clashed)
    waits.add(me)
    try:
        await asyncio.sleep(0)  # branches started with this one (gather) reach their wait
        if me in clashed or any(t is not me and not t.done() for t in ctx._in_flight):
            raise _beside()
        return await _wait(ctx, parts, seq, checked, timeout_at)
    finally:
        waits.discard(me)
        clashed.discard(me)


def _refuse_beside(
    ctx: Sleeper, me: asyncio.Task[object], waits: set[asyncio.Task[object]], clashed: set[object]
) -> None:
    others = {t for t in waits if t is not me and not t.done()}
    if others or any(t is not me and not t.done() for t in ctx._in_flight):
        clashed.update(others)
        raise _beside()


def _beside() -> ConfigError:
    return ConfigError(
        "ctx.wait_for",
        "a wait while another call or wait of the workflow is in flight is refused: "
        "from parallel branches (asyncio.gather), await them first and wait alone",
    )


async def _wait(
    ctx: Sleeper, parts: SchedulerParts, seq: int, name: str, timeout_at: datetime | None
) -> JsonValue:
    """Return the signal recorded at `seq`, or ask the store; raise at the timeout."""
    decision = signalling.decide(ctx.steps.get(seq), seq, name, timeout_at=timeout_at)
    if isinstance(decision, NonDeterminism):
        raise NonDeterminismError(ctx.task_id, seq, decision.recorded, decision.called)
    if isinstance(decision, Received):
        return decision.payload
    if isinstance(decision, TimedOut):
        raise SignalTimeoutError(ctx.task_id, name, seq, decision.timeout_at)
    op = WaitSignal(
        ctx.task_id,
        locked_by=parts.locked_by,
        epoch=ctx.epoch,
        seq=seq,
        name=name,
        timeout_at=decision.timeout_at,
    )
    try:
        pending = (
            await replied.taken(parts, ctx.task_id, ctx.epoch)
            if ctx.task_id in parts.pending
            else None
        )
        if ctx.task_id not in parts.claiming:  # held: a signal in its inbox rides the next write
            try:
                found = await _in_inbox(parts, ctx.task_id, name, pending)
            except BaseException:
                replied.hand_back(pending)
                raise
            if found is not None:
                replied.carry(parts, ctx.task_id, pending, op, found.id)
                return found.payload
        waited = await replied.next_write(parts, ctx.task_id, op, pending)
    except StaleEpochError as exc:
        raise Abandoned from exc
    except StoreUnavailableError as exc:
        raise StoreLost(exc) from exc
    assert isinstance(waited, Waited)
    if waited.outcome == "received":
        return waited.payload
    if waited.outcome == "timed_out":
        raise SignalTimeoutError(ctx.task_id, name, seq, decision.timeout_at)
    task_event(ctx.task_id, ctx.task.workflow, "waiting", f"for signal {name!r}")
    raise Waiting


async def _in_inbox(
    parts: SchedulerParts, task_id: str, name: str, taken: list[PendingReply] | None
) -> Signal | None:
    """The oldest signal of `name` sent to the task and not consumed yet, if any (a read).

    Its wait goes on with it at once; the task's next write consumes it
    (`ReplyThen.waits`), the oldest of its name then as now: only this task's
    waits consume its signals, and only its holder makes them. Those an
    earlier wait of this run goes on with already are not found again.
    """
    carried = taken.found if isinstance(taken, replied.Riders) else ()
    gone = {signal_id for _, signal_id in (*parts.waits.get(task_id, ()), *carried)}
    for signal in await parts.store.task_signals(task_id):
        if signal.name == name and signal.consumed_seq is None and signal.id not in gone:
            return signal
    return None
