"""A TaskEffect as both stores write it: encoded columns, the event's detail, the rings."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from shepherd.core import effects
from shepherd.core.effects import Claim, TaskEffect
from shepherd.core.events import EventKind
from shepherd.core.records import JsonValue
from shepherd.core.states import ProcessState
from shepherd.core.supervision import Compensate, Escalate, Reset
from shepherd.errors import PayloadError
from shepherd.payloads import dumps, dumps_error
from shepherd.store import signals as ch
from shepherd.store.effect_rows import effect_row

NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
LIMIT = 4096


class Limited:
    """Encodes as a store's batch does, with a small payload limit."""

    def dumps(self, value: JsonValue) -> str:
        return dumps(value, limit=LIMIT)

    def dumps_error(self, value: JsonValue) -> str:
        return dumps_error(value, limit=LIMIT)


def test_finish_stores_the_result_and_echoes_it_in_the_event_as_stored() -> None:
    row = effect_row("t1", effects.on_finish({"total": 3, "items": None}), Limited())

    assert (row.process_state, row.release, row.revoke) == ("processed", True, False)
    assert row.result == '{"total":3,"items":null}'
    assert (row.error, row.failure_count, row.not_before, row.crashes) == (None, None, None, None)
    assert (row.event, json.loads(row.detail)) == ("processed", {"result": json.loads(row.result)})
    assert not row.drop_requests
    assert row.rings == (ch.task_channel("t1"),)


def test_a_null_result_is_stored_as_json_null_not_left_unchanged() -> None:
    row = effect_row("t1", effects.on_finish(None), Limited())

    assert row.result == "null"
    assert row.detail == '{"result":null}'


def test_a_result_over_the_limit_is_refused() -> None:
    with pytest.raises(PayloadError):
        effect_row("t1", effects.on_finish("x" * LIMIT), Limited())


def test_fail_cuts_a_huge_error_and_echoes_the_cut_error() -> None:
    row = effect_row("t1", effects.on_fail(ProcessState.ERROR, {"reason": "x" * LIMIT}), Limited())

    assert row.error is not None
    error = json.loads(row.error)
    assert error["truncated"] is True
    assert json.loads(row.detail) == {"error": error}
    assert (row.event, row.process_state, row.release, row.revoke) == (
        "error",
        "error",
        True,
        False,
    )
    assert row.drop_requests
    assert row.rings == (ch.task_channel("t1"),)


def test_start_compensation_keeps_the_claim_and_rings_nothing() -> None:
    row = effect_row("t1", effects.on_start_compensation({"e": 1}), Limited())

    assert (row.process_state, row.release, row.revoke, row.failure_count) == (
        "compensating",
        False,
        False,
        0,
    )
    assert (row.error, row.detail) == ('{"e":1}', '{"error":{"e":1}}')
    assert not row.drop_requests
    assert row.rings == ()


def test_a_reset_revokes_the_claim_and_rings_the_schedulers_only() -> None:
    decision = Reset(
        failure_count=2,
        not_before=NOW + timedelta(seconds=5),
        process_state=ProcessState.PENDING,
        reason="expired",
    )

    row = effect_row("t1", effects.on_supervision(decision, now=NOW), Limited())

    assert (row.process_state, row.release, row.revoke) == ("pending", True, True)
    assert (row.failure_count, row.not_before) == (2, NOW + timedelta(seconds=5))
    assert (row.error, row.result, row.crashes, row.owner_deaths) == (None, None, None, None)
    assert (row.event, json.loads(row.detail)) == (
        "reset",
        {"reason": "expired", "failure_count": 2},
    )
    assert row.drop_requests
    assert row.rings == (ch.TASKS,)


def test_an_escalation_rings_the_schedulers_and_the_tasks_waiters() -> None:
    effect = effects.on_supervision(Escalate(failure_count=3, reason="r"), now=NOW)

    row = effect_row("t1", effect, Limited())

    assert (row.process_state, row.error) == ("error", '{"reason":"r"}')
    assert row.rings == (ch.TASKS, ch.task_channel("t1"))


def test_compensate_is_claimable_at_the_writes_instant() -> None:
    effect = effects.on_supervision(Compensate(failure_count=0, reason="r"), now=NOW)

    row = effect_row("t1", effect, Limited())

    assert (row.process_state, row.not_before, row.failure_count) == ("compensating", NOW, 0)
    assert (row.event, row.detail) == ("compensating", '{"error":{"reason":"r"}}')


def test_a_crash_verdict_stores_its_crashes_and_owner_deaths() -> None:
    verdict = Escalate(failure_count=1, reason="poison", crashes=("h:1:a#2",), owner_deaths=None)

    row = effect_row("t1", effects.on_crash(verdict), Limited())

    assert (row.crashes, row.owner_deaths, row.failure_count) == ('["h:1:a#2"]', 0, None)
    assert row.error == '{"reason":"poison","crashes":["h:1:a#2"]}'
    assert json.loads(row.detail) == {"error": {"reason": "poison"}, "failure_count": 1}


def test_a_detail_without_an_echo_is_cut_rather_than_refused() -> None:
    effect = effects.on_supervision(Escalate(failure_count=3, reason="x" * LIMIT), now=NOW)

    row = effect_row("t1", effect, Limited())

    assert json.loads(row.detail)["truncated"] is True


def test_an_effect_echoing_a_column_it_leaves_unchanged_is_refused() -> None:
    effect = TaskEffect(
        process_state=ProcessState.PROCESSED,
        claim=Claim.RELEASED,
        drop_requests=False,
        event=EventKind.PROCESSED,
        echo="result",
    )

    with pytest.raises(ValueError, match="echoes its result"):
        effect_row("t1", effect, Limited())
