"""Error bodies are cut to the payload limit, never refused: a task can always fail.

A payload over the limit is refused with PayloadError (`test_store_submit`), and
so is a successful result. An error (a failed reply's body, a task's error, a
noted event) is cut instead: its main fields kept, its big ones shortened, and
`"truncated": true` added.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from shepherd.core.states import ProcessState, StepState
from shepherd.errors import PayloadError
from shepherd.payloads import ERROR_FIELD_CHARS, MAX_PAYLOAD_BYTES
from support.factories import claimed_task, step_start, taken_request

if TYPE_CHECKING:
    from shepherd.core.records import JsonValue, Task
    from shepherd.store.contract import Store

HUGE = 10 * 1024 * 1024


def _huge_error() -> dict[str, JsonValue]:
    return {
        "type": "RuntimeError",
        "message": "m" * HUGE,
        "traceback": "frame\n" * (HUGE // 6) + "RuntimeError: the end",
        "detail": {"rows": ["\x00 é"] * 100_000},
        "bug": True,
    }


def _assert_cut(error: Any) -> None:
    assert isinstance(error, dict)
    assert error["truncated"] is True
    assert error["type"] == "RuntimeError"
    assert error["bug"] is True
    assert str(error["message"]).startswith("m" * ERROR_FIELD_CHARS)
    assert str(error["traceback"]).endswith("RuntimeError: the end")
    assert isinstance(error["detail"], str)
    assert "\ufffd é" in error["detail"]


async def _running_step(store: Store) -> Task:
    task = await claimed_task(store, locked_by="s1")
    await store.start_step(step_start(task, seq=1, agent="a"))
    return task


async def test_a_failed_reply_with_a_huge_error_is_recorded_cut(store: Store) -> None:
    task = await _running_step(store)
    request = await taken_request(store, agent="a")

    assert await store.reply_and_ack(request, worker="w1", ok=False, body=_huge_error())
    ((reply, current),) = await store.record_replies(locked_by="s1", limit=10)

    assert current
    assert not reply.ok
    _assert_cut(reply.body)
    after = await store.get_task(task.id)
    assert after is not None
    (step,) = after.steps
    assert step.state is StepState.FAILED
    _assert_cut(step.error)
    failed = [e for e in await store.task_events(task.id) if e.kind == "step_failed"]
    assert len(failed) == 1
    assert isinstance(failed[0].detail, dict)
    _assert_cut(failed[0].detail["error"])


@pytest.mark.parametrize("state", [ProcessState.ERROR, ProcessState.COMPENSATED])
async def test_fail_task_with_a_huge_error_records_it_cut(
    store: Store, state: ProcessState
) -> None:
    task = await claimed_task(store, locked_by="s1")

    await store.fail_task(
        task.id, locked_by="s1", epoch=task.lock_epoch, state=state, error=_huge_error()
    )

    after = await store.get_task(task.id)
    assert after is not None
    assert after.process_state is state
    _assert_cut(after.error)
    (ended,) = [e for e in await store.task_events(task.id) if e.kind == str(state)]
    assert isinstance(ended.detail, dict)
    _assert_cut(ended.detail["error"])


async def test_start_compensation_with_a_huge_error_records_it_cut(store: Store) -> None:
    task = await claimed_task(store, locked_by="s1")

    await store.start_compensation(
        task.id, locked_by="s1", epoch=task.lock_epoch, error=_huge_error()
    )

    after = await store.get_task(task.id)
    assert after is not None
    assert after.process_state is ProcessState.COMPENSATING
    _assert_cut(after.error)


async def test_a_huge_note_is_recorded_cut(store: Store) -> None:
    task = await claimed_task(store, locked_by="s1")

    await store.note(task.id, "gave_up", _huge_error())

    (noted,) = [e for e in await store.task_events(task.id) if e.kind == "gave_up"]
    _assert_cut(noted.detail)


async def test_an_oversized_result_is_still_refused(store: Store) -> None:
    task = await _running_step(store)
    request = await taken_request(store, agent="a")
    big = "r" * (2 * MAX_PAYLOAD_BYTES)

    with pytest.raises(PayloadError, match="over the 1 MiB limit"):
        await store.finish_task(task.id, locked_by="s1", epoch=task.lock_epoch, result=big)
    # A successful reply too large to keep becomes the step's PayloadError failure.
    assert await store.reply_and_ack(request, worker="w1", ok=True, body=big)
    ((reply, current),) = await store.record_replies(locked_by="s1", limit=10)

    assert current
    assert not reply.ok
    assert isinstance(reply.body, dict)
    assert reply.body["type"] == "PayloadError"
    assert "over the 1 MiB limit" in str(reply.body["message"])
    after = await store.get_task(task.id)
    assert after is not None
    assert after.process_state is ProcessState.PROCESSING
    assert after.result is None
