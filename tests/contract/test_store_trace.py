"""The trace context travels with a task: submit, request, reply (`shepherd.tracing`).

The store keeps each context as the opaque text it was given and hands it back:
the task's (the submitter's) on every read of the task, a step's on its request,
an answer's on its reply, queued or recorded where it is made. None stays None.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from shepherd.core.records import Reply
from support.factories import claimed_task, new_task, step_start, taken_request

if TYPE_CHECKING:
    from shepherd.store.contract import Store

SUBMITTER = '{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}'
TASK_RUN = (
    '{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01",'
    '"tracestate":"congo=t61rcWkgMzE"}'
)
STEP = '{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-53995c3f42cd8ad8-01"}'


async def test_the_submitters_context_is_kept_with_the_task(store: Store) -> None:
    traced = await store.submit_task(replace(new_task("wf", {"n": 1}), trace=SUBMITTER))
    plain = await store.submit_task(new_task("wf", {"n": 2}))

    got = await store.get_task(traced.task_id)
    assert got is not None
    assert got.trace == SUBMITTER
    claimed = {t.id: t for t in await store.claim_tasks(locked_by="s1", limit=10)}
    assert claimed[traced.task_id].trace == SUBMITTER
    assert claimed[plain.task_id].trace is None
    listed = {t.id: t.trace for t in await store.list_tasks(limit=10)}
    assert listed == {traced.task_id: SUBMITTER, plain.task_id: None}


async def test_submit_many_keeps_each_tasks_context(store: Store) -> None:
    other = SUBMITTER.replace("b7ad6b7169203331", "c8be7c8270314442")
    submitted = await store.submit_tasks(
        [
            replace(new_task("wf", 1), trace=SUBMITTER),
            new_task("wf", 2),
            replace(new_task("wf", 3, key="k"), trace=other),
        ]
    )

    traces = []
    for one in submitted:
        task = await store.get_task(one.task_id)
        assert task is not None
        traces.append(task.trace)
    assert traces == [SUBMITTER, None, other]


async def test_a_key_already_used_keeps_the_first_submitters_context(store: Store) -> None:
    first = await store.submit_task(replace(new_task("wf", 1, key="k"), trace=SUBMITTER))
    again = await store.submit_task(replace(new_task("wf", 1, key="k"), trace=STEP))

    assert again.task_id == first.task_id
    task = await store.get_task(first.task_id)
    assert task is not None
    assert task.trace == SUBMITTER


async def test_a_steps_context_travels_on_its_request(store: Store) -> None:
    task = await claimed_task(store, locked_by="s1")
    await store.start_step(replace(step_start(task, seq=1, agent="a"), trace=TASK_RUN))
    await store.start_step(step_start(task, seq=2, agent="b"))

    assert (await taken_request(store, agent="a")).trace == TASK_RUN
    assert (await taken_request(store, agent="b")).trace is None


async def test_an_answers_context_travels_on_its_queued_reply(store: Store) -> None:
    task = await claimed_task(store, locked_by="s1")
    await store.start_step(replace(step_start(task, seq=1, agent="a"), trace=TASK_RUN))
    await store.start_step(step_start(task, seq=2, agent="b"))
    first = await taken_request(store, agent="a")
    second = await taken_request(store, agent="b")

    assert await store.reply_and_ack(first, worker="w1", ok=True, body=1, trace=STEP) is True
    assert await store.reply_and_ack(second, worker="w1", ok=False, body={"type": "X"}) is True

    recorded = await store.record_replies(locked_by="s1", limit=10)
    assert {(r.seq, r.trace, counted) for r, counted in recorded} == {
        (1, STEP, True),
        (2, None, True),
    }


async def test_an_answer_recorded_where_it_is_made_keeps_its_context(store: Store) -> None:
    task = await claimed_task(store, locked_by="s1")
    await store.start_step(replace(step_start(task, seq=1, agent="a"), trace=TASK_RUN))
    request = await taken_request(store, agent="a")

    answered = await store.reply_and_ack(
        request, worker="w1", ok=True, body={"paid": True}, recorder="s1", trace=STEP
    )

    assert isinstance(answered, Reply)
    assert answered.trace == STEP
