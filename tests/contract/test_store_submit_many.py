"""Submitting many tasks at once: one transaction, all or none, keys deduplicated."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest

from shepherd.core.states import ProcessState
from shepherd.errors import PayloadError
from shepherd.store import signals as ch
from support.factories import new_task

if TYPE_CHECKING:
    from shepherd.store.contract import Store


async def test_many_tasks_are_inserted_in_one_commit_in_order(store: Store) -> None:
    wake = store.signals.event(ch.TASKS)
    before = store.statistics()["commits"]

    submitted = await store.submit_tasks(
        [new_task("wf", {"n": n}, reply_to="inbox") for n in range(50)]
    )

    assert store.statistics()["commits"] - before == 1
    assert wake.is_set()  # the schedulers are woken (once: one commit rings once)
    assert all(s.created for s in submitted)
    assert len({s.task_id for s in submitted}) == 50
    for n, one in enumerate(submitted):
        task = await store.get_task(one.task_id)
        assert task is not None
        assert (task.input, task.reply_to, task.process_state) == (
            {"n": n},
            "inbox",
            ProcessState.PENDING,
        )
        events = await store.task_events(one.task_id)
        assert [(e.kind, e.reply_to) for e in events] == [("received", "inbox")]


async def test_keys_are_deduplicated_within_the_call_and_against_the_store(store: Store) -> None:
    old = await store.submit_task(new_task("wf", "old", key="k-old"))

    submitted = await store.submit_tasks(
        [
            new_task("wf", 1, key="k1"),
            new_task("wf", 2, key="k-old"),
            new_task("wf", 3, key="k1"),
            new_task("other", 4, key="k1"),  # keys are per workflow
            new_task("wf", 5),
            new_task("wf", 6),
        ]
    )

    ids = [s.task_id for s in submitted]
    assert ids[0] == ids[2]
    assert ids[1] == old.task_id
    assert len({ids[0], ids[1], ids[3], ids[4], ids[5]}) == 5
    assert [s.created for s in submitted] == [True, False, False, True, True, True]
    first = await store.get_task(ids[0])
    assert first is not None
    assert first.input == 1  # the first of a repeated key wins
    assert len(await store.list_tasks()) == 5
    assert [e.kind for e in await store.task_events(ids[0])] == ["received"]


@pytest.mark.parametrize(
    ("payload", "problem"),
    [
        pytest.param(float("nan"), "NaN", id="NaN"),
        pytest.param("x" * (1024 * 1024 + 1), "limit", id="over-1MiB"),
        pytest.param({1, 2}, "not JSON", id="set"),
    ],
)
async def test_one_bad_input_refuses_the_whole_call_naming_its_index(
    store: Store, payload: object, problem: str
) -> None:
    good = [new_task("wf", n, key=f"k{n}") for n in range(5)]

    with pytest.raises(PayloadError, match=r"^submissions\[3\]: ") as caught:
        await store.submit_tasks([*good[:3], new_task("wf", payload), *good[3:]])

    assert problem in str(caught.value)
    assert await store.list_tasks() == []
    assert await store.read_events(reply_to=None, after_id=0) == []
    # Nothing of the refused call holds a key: the same keys make new tasks now.
    assert all(s.created for s in await store.submit_tasks(good))


async def test_a_refused_call_does_not_fail_the_others_in_its_batch(store: Store) -> None:
    outcomes = await asyncio.gather(
        store.submit_task(new_task("wf", "alone")),
        store.submit_tasks([new_task("wf", "a"), new_task("wf", float("inf"))]),
        store.submit_tasks([new_task("wf", "b"), new_task("wf", "c")]),
        return_exceptions=True,
    )

    assert isinstance(outcomes[1], PayloadError)
    assert str(outcomes[1]).startswith("submissions[1]: ")
    assert not isinstance(outcomes[0], BaseException)
    assert not isinstance(outcomes[2], BaseException)
    assert sorted(t.input for t in await store.list_tasks()) == ["alone", "b", "c"]


async def test_concurrent_calls_with_one_key_make_one_task(store: Store) -> None:
    outcomes = await asyncio.gather(
        *(store.submit_tasks([new_task("wf", i, key="k"), new_task("wf", i)]) for i in range(10))
    )

    keyed = [pair[0] for pair in outcomes]
    assert len({s.task_id for s in keyed}) == 1
    assert sum(s.created for s in keyed) == 1
    assert len(await store.list_tasks(limit=100)) == 11


async def test_nothing_to_submit_writes_nothing(store: Store) -> None:
    before = store.statistics()["commits"]

    assert await store.submit_tasks([]) == []

    assert store.statistics()["commits"] == before
