"""What start_step, reply_and_ack and record_replies write, as both backends decide it."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from shepherd.core.events import EventKind
from shepherd.core.records import JsonValue, Reply, Request
from shepherd.core.states import StepKind
from shepherd.errors import PayloadError, StaleEpochError
from shepherd.store.contract import REPLY_GRACE, StepStart
from shepherd.store.encoding import Encoding
from shepherd.store.ops import ReplyAndAck, ReplyThen, StartStep
from shepherd.store.rows import unix_instant
from shepherd.store.step_writes import (
    ReplyCol,
    go_on,
    handed_request,
    plan_starts,
    reply_body,
    sort_replies,
    stale_then,
)

NOW = 1000.0


def later(seconds: float) -> float:
    return NOW + seconds


def start(task_id: str = "t1", **fields: Any) -> StepStart:
    values: dict[str, Any] = {
        "locked_by": "s/1",
        "epoch": 2,
        "seq": 0,
        "agent": "pay",
        "payload": {"n": 1},
        "within": 5.0,
        "attempt": 1,
    }
    values.update(fields)
    return StepStart(task_id=task_id, **values)


def reply_row(**columns: Any) -> tuple[Any, ...]:
    """A row of REPLY_COLUMNS: a current reply completing a running step, unless overridden."""
    values: dict[str, Any] = {
        "id": 7,
        "task_id": "t1",
        "seq": 0,
        "attempt": 1,
        "lock_epoch": 2,
        "ok": 1,
        "body": '{"paid": true}',
        "task_epoch": 2,
        "key": "order-1",
        "reply_to": "inbox",
        "step_state": "running",
        "step_attempt": 1,
        "agent": "pay",
        "kind": "forward",
        "compensates": None,
        "trace": None,
    }
    values.update(columns)
    assert set(values) == set(ReplyCol.names())
    return tuple(values[name] for name in ReplyCol.names())


def test_a_start_writes_its_step_its_request_and_its_claim() -> None:
    plan = plan_starts(
        [start(within=5.0, queue_allowance=1.0, retry={"attempts": 2}, suspect=True)],
        {"t1": (2, "s/1")},
        encode=Encoding().encode,
        later=later,
    )

    assert plan.out == [NOW + 6.0]
    assert plan.steps == [("t1", 0, "forward", "pay", 1, NOW + 6.0, '{"n":1}', None, None, None)]
    assert plan.requests == [
        (
            "pay",
            "t1",
            0,
            1,
            2,
            "forward",
            '{"n":1}',
            NOW + 6.0,
            5.0,
            '{"attempts":2}',
            1,
            None,
            None,
            None,
        )
    ]
    assert plan.claims == {"t1": (2, "s/1", NOW + 6.0 + REPLY_GRACE)}
    assert plan.superseded == []
    assert plan.handed == []


def test_a_start_taken_as_it_is_queued_is_handed_not_queued() -> None:
    taken = replace(start(within=5.0), taken_by="w/a")
    plan = plan_starts(
        [start("t2"), taken],
        {"t1": (2, "s/1"), "t2": (2, "s/1")},
        encode=Encoding().encode,
        later=later,
    )

    assert [row[1] for row in plan.requests] == ["t2"]
    ((index, row, handed),) = plan.handed
    assert (index, row[1], handed) == (1, "t1", taken)
    assert plan.out[1] == NOW + 5.0
    request = handed_request(
        taken, 41, complete_by=unix_instant(NOW + 5.0), payload=row[6], created_at=unix_instant(NOW)
    )
    assert (request.id, request.task_id, request.payload, request.lock_epoch) == (
        41,
        "t1",
        {"n": 1},
        2,
    )


def test_a_fenced_off_or_unencodable_start_fails_alone_and_a_retry_supersedes() -> None:
    plan = plan_starts(
        [
            start("t1", epoch=1),  # the task is at epoch 2 now
            start("t2", payload=float("nan")),
            start("t3", seq=4, attempt=2, within=1.0),
            start("t3", seq=5, within=3.0),
        ],
        {"t1": (2, "s/1"), "t2": (2, "s/1"), "t3": (2, "s/1")},
        encode=Encoding().encode,
        later=later,
    )

    stale, refused, *started = plan.out
    assert isinstance(stale, StaleEpochError)
    assert isinstance(refused, PayloadError)
    assert started == [NOW + 1.0, NOW + 3.0]
    assert [step[:2] for step in plan.steps] == [("t3", 4), ("t3", 5)]
    assert plan.superseded == [("t3", 4)]
    assert plan.claims == {"t3": (2, "s/1", NOW + 3.0 + REPLY_GRACE)}, "the last step's wins"
    assert plan.outcomes(unix_instant)[:2] == [stale, refused]
    assert plan.outcomes(unix_instant)[2:] == [unix_instant(NOW + 1.0), unix_instant(NOW + 3.0)]


def test_a_result_that_cannot_be_stored_is_replied_as_the_handlers_failure() -> None:
    encoding = Encoding(payload_limit=300)
    codec = {"dumps": encoding.dumps, "dumps_error": encoding.dumps_error}

    assert reply_body(True, {"ok": 1}, **codec) == (True, '{"ok":1}')
    assert reply_body(False, {"type": "Boom"}, **codec) == (False, '{"type":"Boom"}')
    ok, body = reply_body(True, "x" * 400, **codec)
    assert not ok
    assert json.loads(body)["type"] == "PayloadError"


def test_a_current_reply_is_recorded_with_its_event() -> None:
    replies = sort_replies([reply_row()])

    reply = Reply(id=7, task_id="t1", seq=0, attempt=1, lock_epoch=2, ok=True, body={"paid": True})
    assert replies.taken == [(reply, True)]
    assert replies.ids == [7]
    assert replies.completed == [("t1", 0, '{"paid": true}')]
    assert (replies.failed, replies.compensated) == ([], [])
    assert replies.touched == ["t1"]
    ((task_id, key, reply_to, kind, detail),) = replies.events
    assert (task_id, key, reply_to, kind) == ("t1", "order-1", "inbox", EventKind.STEP_COMPLETED)
    assert json.loads(detail) == {"seq": 0, "agent": "pay", "attempt": 1}


@pytest.mark.parametrize(
    "stale",
    [{"task_epoch": 3}, {"step_state": "completed"}, {"step_attempt": 2}, {"step_state": None}],
    ids=["older epoch", "step no longer running", "older attempt", "step gone"],
)
def test_a_reply_someone_gave_up_on_is_only_dropped(stale: dict[str, Any]) -> None:
    replies = sort_replies([reply_row(**stale)])

    assert [current for _, current in replies.taken] == [False]
    assert replies.ids == [7]
    assert (replies.completed, replies.touched, replies.events) == ([], [], [])


def test_a_failure_keeps_its_stored_body_and_an_undo_compensates_its_step() -> None:
    error: JsonValue = {"type": "Declined"}
    replies = sort_replies(
        [
            reply_row(id=1, ok=0, body=json.dumps(error)),
            reply_row(id=2, seq=3, kind=StepKind.UNDO, compensates=0),
        ]
    )

    assert replies.failed == [("t1", 0, json.dumps(error))]
    assert replies.completed == [("t1", 3, '{"paid": true}')]
    assert replies.compensated == [("t1", 0)]
    assert [kind for *_, kind, _ in replies.events] == [
        EventKind.STEP_FAILED,
        EventKind.STEP_COMPLETED,
    ]
    assert json.loads(replies.events[0][4])["error"] == error


def _reply_then(*oks: bool) -> ReplyThen:
    request = Request(
        id=1,
        agent="pay",
        task_id="t1",
        seq=1,
        attempt=1,
        lock_epoch=2,
        payload=None,
        complete_by=unix_instant(NOW + 5),
    )
    replies = [ReplyAndAck(request, worker="w", ok=ok, body=None, recorder="s/1") for ok in oks]
    return ReplyThen(replies, then=StartStep(start()))


def _recorded(ok: bool) -> Reply:
    return Reply(id=0, task_id="t1", seq=1, attempt=1, lock_epoch=2, ok=ok, body=None)


def test_the_next_write_goes_only_if_every_reply_counted_as_handed_over() -> None:
    ops = [_reply_then(True, False), _reply_then(True), _reply_then(True), _reply_then(True)]
    answers: list[bool | Reply] = [
        _recorded(True),
        _recorded(False),  # both counted: the first op's write goes
        False,  # the request was no longer the worker's
        True,  # queued for another holder: not recorded on its step here
        _recorded(False),  # a result the store refused, recorded as a failure
    ]

    decided = go_on(ops, answers)

    assert [counted for _, counted in decided] == [True, False, False, False]
    assert [len(mine) for mine, _ in decided] == [2, 1, 1, 1]
    stale = stale_then(ops[1])
    assert (stale.task_id, stale.epoch) == ("t1", 2)
