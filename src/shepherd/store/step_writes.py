"""What `start_step`, `reply_and_ack` and `record_replies` write, decided once for both backends.

A backend reads what it must under its lock (the tasks' fencing columns, the
owner's replies), hands it here, and turns the answer into its own statements
(`executemany` on SQLite, `unnest` arrays on PostgreSQL). Instants stay in the
backend's type `T`: `later(seconds)` is the batch's instant plus `seconds`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from shepherd.core.events import EventKind
from shepherd.core.records import JsonValue, Reply, Request
from shepherd.core.states import StepKind, StepState
from shepherd.errors import PayloadError, StaleEpochError
from shepherd.payloads import dumps_detail, load_stored
from shepherd.store.contract import REPLY_GRACE
from shepherd.store.ops import EndChild, StartStep
from shepherd.store.rows import Columns, Row

if TYPE_CHECKING:
    from datetime import datetime

    from shepherd.store.contract import StepStart
    from shepherd.store.effect_rows import Encoder
    from shepherd.store.ops import ReplyAndAck, ReplyThen

__all__ = [
    "REPLY_COLUMNS",
    "STEP_OWNER_COLUMNS",
    "Answers",
    "Replies",
    "ReplyCol",
    "Starts",
    "encoded_answers",
    "go_on",
    "handed_request",
    "plan_answers",
    "plan_starts",
    "reply_body",
    "sort_replies",
    "stale_then",
    "then_holder",
]

T = TypeVar("T")


class ReplyCol(Columns):
    """A row of REPLY_COLUMNS: a reply, then its task's and its step's columns."""

    ID: ClassVar[int]
    TASK_ID: ClassVar[int]
    SEQ: ClassVar[int]
    ATTEMPT: ClassVar[int]
    LOCK_EPOCH: ClassVar[int]
    OK: ClassVar[int]
    BODY: ClassVar[int]
    TASK_EPOCH: ClassVar[int]
    KEY: ClassVar[int]
    REPLY_TO: ClassVar[int]
    STEP_STATE: ClassVar[int]
    STEP_ATTEMPT: ClassVar[int]
    AGENT: ClassVar[int]
    KIND: ClassVar[int]
    COMPENSATES: ClassVar[int]
    TRACE: ClassVar[int]


#: The SELECT list of a reply (`r`) joined with its task (`t`) and its step (`s`).
REPLY_COLUMNS = (
    "r.id, r.task_id, r.seq, r.attempt, r.lock_epoch, r.ok, r.body, "
    "t.lock_epoch AS task_epoch, t.key, t.reply_to, s.state AS step_state, "
    "s.attempt AS step_attempt, s.agent, s.kind, s.compensates, r.trace"
)


@dataclass(slots=True)
class Starts(Generic[T]):
    """What a batch of `start_step` operations writes.

    Attributes:
        out: Per operation, in order: its step's complete_by, or its caller's error.
        steps: Step rows (task_id, seq, kind, agent, attempt, complete_by, request,
            undo, compensates, resolution), to upsert `running`.
        requests: Request rows (agent, task_id, seq, attempt, lock_epoch, kind,
            payload, complete_by, within, retry, suspect, resolution, trace, owner_key),
            to enqueue.
        claims: task id -> (lock_epoch, locked_by, the claim's new complete_by):
            the last step's wins, as if applied one by one.
        superseded: (task_id, seq) of steps started again: their old requests go.
        handed: Requests taken as they are queued (`StepStart.taken_by`): the
            operation's position in `out`, its request row (as in `requests`), and
            its step. The backend inserts each, leased and hidden until its
            complete_by, and puts the `Request` (`handed_request`) in `out`.
    """

    out: list[T | Exception] = field(default_factory=list)
    steps: list[tuple[Any, ...]] = field(default_factory=list)
    requests: list[tuple[Any, ...]] = field(default_factory=list)
    claims: dict[str, tuple[int, str, T]] = field(default_factory=dict)
    superseded: list[tuple[str, int]] = field(default_factory=list)
    handed: list[tuple[int, tuple[Any, ...], StepStart]] = field(default_factory=list)

    def outcomes(self, instant: Callable[[T], datetime]) -> list[object]:
        """`out` with each complete_by as an aware datetime."""
        return [value if isinstance(value, Exception) else instant(value) for value in self.out]


def plan_starts(
    starts: Iterable[StepStart],
    owners: Mapping[str, tuple[int, str | None]],
    *,
    encode: Callable[[JsonValue], str | Exception],
    later: Callable[[float], T],
) -> Starts[T]:
    """Mark steps running and queue their requests, fenced by the owners' epochs.

    Args:
        starts: The operations' steps, in order.
        owners: task id -> (lock_epoch, locked_by), read under the batch's lock.
        encode: The batch's payload encoding (`Encoding.encode`).
        later: The batch's instant plus seconds, in the backend's type.
    """
    plan: Starts[T] = Starts()
    for s in starts:
        if owners.get(s.task_id) != (s.epoch, s.locked_by):
            plan.out.append(StaleEpochError(s.task_id, s.epoch))
            continue
        payload = encode(s.payload)
        if isinstance(payload, Exception):
            plan.out.append(payload)
            continue
        resolution = None if s.resolution is None else encode(s.resolution.to_json())
        if isinstance(resolution, Exception):
            plan.out.append(resolution)
            continue
        window = s.within + s.queue_allowance
        complete_by = later(window)
        # The claim outlives the step's deadline, so the agent's deadline passes
        # first and the supervisor sees the step's failure, not a race.
        plan.claims[s.task_id] = (s.epoch, s.locked_by, later(window + REPLY_GRACE))
        if s.attempt > 1:
            plan.superseded.append((s.task_id, s.seq))
        kind = str(s.kind)
        plan.steps.append(
            (
                s.task_id,
                s.seq,
                kind,
                s.agent,
                s.attempt,
                complete_by,
                payload,
                s.undo,
                s.compensates,
                resolution,
            )
        )
        retry = None if s.retry is None else dumps_detail(s.retry)
        row = (
            s.agent,
            s.task_id,
            s.seq,
            s.attempt,
            s.epoch,
            kind,
            payload,
            complete_by,
            float(s.within),
            retry,
            int(s.suspect),
            resolution,
            s.trace,
            s.owner_key,
        )
        if s.taken_by is None:
            plan.requests.append(row)
        else:
            plan.handed.append((len(plan.out), row, s))
        plan.out.append(complete_by)
    return plan


def handed_request(
    start: StepStart,
    request_id: int,
    *,
    complete_by: datetime,
    payload: str,
    created_at: datetime,
) -> Request:
    """The request of `start`, queued as `request_id` and taken at once by `start.taken_by`.

    Its payload is the stored JSON read back, so the handler sees what a worker
    taking it from the queue would see.
    """
    return Request(
        id=request_id,
        agent=start.agent,
        task_id=start.task_id,
        seq=start.seq,
        attempt=start.attempt,
        lock_epoch=start.epoch,
        payload=load_stored(payload),
        complete_by=complete_by,
        kind=start.kind,
        within=float(start.within),
        retry=start.retry,
        suspect=start.suspect,
        resolution=start.resolution,
        created_at=created_at,
        trace=start.trace,
    )


def reply_body(
    ok: bool,
    body: JsonValue,
    *,
    dumps: Callable[[JsonValue], str],
    dumps_error: Callable[[JsonValue], str],
) -> tuple[bool, str]:
    """A reply's outcome and body as stored, encoded by the batch's `dumps` and `dumps_error`.

    An error is cut to size, never refused; a result that cannot be stored is
    the handler's permanent failure.
    """
    if not ok:
        return False, dumps_error(body)
    try:
        return True, dumps(body)
    except PayloadError as exc:
        return False, dumps_error({"type": "PayloadError", "message": str(exc)})


def encoded_answers(
    ops: Sequence[ReplyAndAck], encoder: Encoder
) -> list[tuple[Request, str | None, bool, str, str | None]]:
    """Each reply of `ops` as `plan_answers` takes it: request, recorder, outcome as stored, trace."""
    dumps, dumps_error = encoder.dumps, encoder.dumps_error
    return [
        (
            op.request,
            op.recorder,
            *reply_body(op.ok, op.body, dumps=dumps, dumps_error=dumps_error),
            op.trace,
        )
        for op in ops
    ]


@dataclass(slots=True)
class Replies:
    """What recording the replies taken for one owner writes.

    Attributes:
        taken: Every reply, with whether it was recorded (the caller's outcome).
        ids: The ids of every reply taken: all of them are deleted.
        completed: (task_id, seq, body) of the steps completed, in order.
        failed: (task_id, seq, body) of the steps failed, in order.
        compensated: (task_id, seq) of the forward steps an undo step completed for.
        touched: The tasks whose claim moves one window ahead (once per reply).
        events: (task_id, key, reply_to, kind, detail as JSON text), in order.
    """

    taken: list[tuple[Reply, bool]] = field(default_factory=list)
    ids: list[int] = field(default_factory=list)
    completed: list[tuple[str, int, str]] = field(default_factory=list)
    failed: list[tuple[str, int, str]] = field(default_factory=list)
    compensated: list[tuple[str, int]] = field(default_factory=list)
    touched: list[str] = field(default_factory=list)
    events: list[tuple[str, str | None, str | None, str, str]] = field(default_factory=list)


def sort_replies(rows: Sequence[Row]) -> Replies:
    """Sort rows of REPLY_COLUMNS into what is recorded and what is dropped.

    A reply counts only for the task's current epoch and the running step's
    current attempt; any other is from an attempt someone has given up on.
    """
    out = Replies()
    for row in rows:
        reply = Reply(
            id=row[ReplyCol.ID],
            task_id=row[ReplyCol.TASK_ID],
            seq=row[ReplyCol.SEQ],
            attempt=row[ReplyCol.ATTEMPT],
            lock_epoch=row[ReplyCol.LOCK_EPOCH],
            ok=bool(row[ReplyCol.OK]),
            body=load_stored(row[ReplyCol.BODY]),
            trace=row[ReplyCol.TRACE],
        )
        current = (
            row[ReplyCol.TASK_EPOCH] == reply.lock_epoch
            and row[ReplyCol.STEP_STATE] == StepState.RUNNING
            and row[ReplyCol.STEP_ATTEMPT] == reply.attempt
        )
        out.taken.append((reply, current))
        out.ids.append(reply.id)
        if not current:
            continue
        task_id, seq, body = reply.task_id, reply.seq, row[ReplyCol.BODY]
        agent = row[ReplyCol.AGENT]
        detail: dict[str, JsonValue] = {"seq": seq, "agent": agent, "attempt": reply.attempt}
        if reply.ok:
            out.completed.append((task_id, seq, body))
            compensates = row[ReplyCol.COMPENSATES]
            if row[ReplyCol.KIND] == StepKind.UNDO and compensates is not None:
                out.compensated.append((task_id, compensates))
            kind, text = EventKind.STEP_COMPLETED, dumps_detail(detail)
        else:
            out.failed.append((task_id, seq, body))
            # The body as stored (cut to size when it was written), not encoded again.
            kind, text = EventKind.STEP_FAILED, dumps_detail(detail, error=body)
        out.touched.append(task_id)
        out.events.append((task_id, row[ReplyCol.KEY], row[ReplyCol.REPLY_TO], kind, text))
    return out


class StepOwnerCol(Columns):
    """A row of STEP_OWNER_COLUMNS: a task's fencing and history columns, and one of its steps."""

    TASK_ID: ClassVar[int]
    SEQ: ClassVar[int]
    LOCK_EPOCH: ClassVar[int]
    LOCKED_BY: ClassVar[int]
    KEY: ClassVar[int]
    REPLY_TO: ClassVar[int]
    STATE: ClassVar[int]
    ATTEMPT: ClassVar[int]
    AGENT: ClassVar[int]
    KIND: ClassVar[int]
    COMPENSATES: ClassVar[int]
    ALERTED: ClassVar[int]


#: The SELECT list of a task (`t`) joined with one of its steps (`s`): what recording
#: a reply where it is made reads instead of a queued reply's row.
STEP_OWNER_COLUMNS = (
    "t.id, s.seq, t.lock_epoch, t.locked_by, t.key, t.reply_to, s.state, s.attempt, "
    "s.agent, s.kind, s.compensates, t.alerted"
)


@dataclass(slots=True)
class Answers:
    """What a batch of `reply_and_ack` operations writes.

    Attributes:
        out: Per operation: False (the request was no longer the worker's), True
            (the reply is queued for its task's scheduler), or the `Reply` recorded
            on its step in this transaction, for the scheduler in the worker's process.
        queued: Reply rows (task_id, seq, attempt, lock_epoch, ok, body, trace) to insert.
        recorded: What recording the other replies writes (as `record_replies` would).
    """

    out: list[bool | Reply] = field(default_factory=list)
    queued: list[tuple[str, int, int, int, bool, str, str | None]] = field(default_factory=list)
    recorded: Replies = field(default_factory=Replies)


def plan_answers(
    answers: Sequence[tuple[Request, str | None, bool, str, str | None]],
    acked: Sequence[bool],
    steps: Mapping[tuple[str, int], Row],
) -> Answers:
    """Queue each acknowledged reply, or record it on its step at once.

    A reply is recorded at once when its worker names a `recorder` (the
    scheduler of its own process) and that scheduler holds the task: the same
    check as `record_replies` then applies (the task's epoch and the step's
    attempt), under the same lock, and the reply row is never written. A reply
    for a task held elsewhere is queued for its holder; one for a task this
    recorder holds but whose step moved on is dropped, as `record_replies`
    would drop it.

    Args:
        answers: Per operation: its request, its recorder, its encoded
            outcome (ok, body as stored), and its step span's trace context.
        acked: Per operation, whether its request was still the worker's (and
            is now removed).
        steps: (task_id, seq) -> a row of STEP_OWNER_COLUMNS, for the operations
            with a recorder.
    """
    plan = Answers()
    rows: list[Row] = []
    slots: list[int] = []
    for (request, recorder, ok, body, trace), live in zip(answers, acked, strict=True):
        if not live:
            plan.out.append(False)
            continue
        step = None if recorder is None else steps.get((request.task_id, request.seq))
        if step is None or step[StepOwnerCol.LOCKED_BY] != recorder:
            plan.queued.append(
                (request.task_id, request.seq, request.attempt, request.lock_epoch, ok, body, trace)
            )
            plan.out.append(True)
            continue
        rows.append(
            (
                0,
                request.task_id,
                request.seq,
                request.attempt,
                request.lock_epoch,
                ok,
                body,
                step[StepOwnerCol.LOCK_EPOCH],
                step[StepOwnerCol.KEY],
                step[StepOwnerCol.REPLY_TO],
                step[StepOwnerCol.STATE],
                step[StepOwnerCol.ATTEMPT],
                step[StepOwnerCol.AGENT],
                step[StepOwnerCol.KIND],
                step[StepOwnerCol.COMPENSATES],
                trace,
            )
        )
        slots.append(len(plan.out))
        plan.out.append(True)
    plan.recorded = sort_replies(rows)
    plan.recorded.ids.clear()  # no reply row was written
    for slot, (reply, current) in zip(slots, plan.recorded.taken, strict=True):
        if current:
            plan.out[slot] = reply
    return plan


def go_on(
    ops: Sequence[ReplyThen],
    answers: Sequence[bool | Reply],
    claimed: Sequence[bool] | None = None,
) -> list[tuple[tuple[bool | Reply, ...], bool]]:
    """Per `reply_then` operation: its replies' outcomes, and whether its `then` is written.

    `answers` are the outcomes of every operation's replies, in order (as one
    `reply_and_ack` batch of them all returned them). `then` goes only if every
    reply of its operation was recorded on its step (a `Reply`) as the outcome
    it was handed over as: a result that could not be stored is recorded as a
    failure, and the workflow that went on with the result must not go further.
    Nor does it go where its claim (`ReplyThen.claim`) was not made: `claimed`,
    per operation (None: every one's, as when none claims).
    """
    out: list[tuple[tuple[bool | Reply, ...], bool]] = []
    at = 0
    for i, op in enumerate(ops):
        mine = tuple(answers[at : at + len(op.replies)])
        at += len(op.replies)
        counted = (claimed is None or claimed[i]) and all(
            isinstance(answer, Reply) and answer.ok == reply.ok
            for answer, reply in zip(mine, op.replies, strict=True)
        )
        out.append((mine, counted))
    assert at == len(answers), "an outcome per reply"
    return out


def stale_then(op: ReplyThen) -> StaleEpochError:
    """The outcome of a `then` not written: a reply of its operation did not count, or its
    claim was not made."""
    task_id, _, epoch = then_holder(op)
    return StaleEpochError(task_id, epoch)


def then_holder(op: ReplyThen) -> tuple[str, str, int]:
    """The task `op.then` writes, its holder and the epoch it is fenced by."""
    then = op.then
    if isinstance(then, StartStep):
        return then.start.task_id, then.start.locked_by, then.start.epoch
    if isinstance(then, EndChild):
        return then.end.task_id, then.end.locked_by, then.end.epoch
    return then.task_id, then.locked_by, then.epoch
