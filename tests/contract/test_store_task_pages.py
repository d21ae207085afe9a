"""The dashboard's task list: pages by a keyset cursor, creation-time ranges, every filter in order."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest

from shepherd.core.states import ProcessState
from shepherd.errors import ConfigError
from shepherd.store import task_filters
from shepherd.store.cursor import TaskCursor
from support.factories import new_task

if TYPE_CHECKING:
    from shepherd.core.records import Task
    from shepherd.store.contract import Store
    from shepherd.testing import FakeClock


async def _made(store: Store, clock: FakeClock, n: int, *, same_instant: int = 1) -> list[str]:
    """`n` tasks over workflows wf-0..wf-2, `same_instant` at each instant; newest first."""
    ids = []
    for i in range(n):
        ids.append((await store.submit_task(new_task(f"wf-{i % 3}", key=f"k{i}"))).task_id)
        if (i + 1) % same_instant == 0:
            clock.advance(1)
    tasks = [await store.get_task(task_id) for task_id in ids]
    ordered = sorted(
        (t for t in tasks if t is not None), key=lambda t: (t.created_at, t.id), reverse=True
    )
    return [t.id for t in ordered]


async def _walk(store: Store, size: int, **filters: Any) -> list[str]:
    """Every task matching `filters`, page after page of `size`, by the cursor."""
    seen: list[str] = []
    before: TaskCursor | None = None
    while True:
        page: list[Task] = await store.list_tasks(limit=size, before=before, **filters)
        seen += [t.id for t in page]
        if len(page) < size:
            return seen
        before = TaskCursor.of(page[-1])


async def test_pages_cover_every_task_once_in_order_even_when_created_at_ties(
    store: Store, fake_clock: FakeClock
) -> None:
    # Four tasks per instant: the id breaks the tie, and no page boundary loses or repeats one.
    ids = await _made(store, fake_clock, 22, same_instant=4)

    for size in (1, 3, 4, 5, 22, 50):
        assert await _walk(store, size) == ids


async def test_a_page_continues_after_its_cursor_whatever_is_submitted_meanwhile(
    store: Store, fake_clock: FakeClock
) -> None:
    ids = await _made(store, fake_clock, 6)
    first = await store.list_tasks(limit=3)
    await store.submit_task(new_task("wf-0"))  # newer: it belongs before the first page

    second = await store.list_tasks(limit=3, before=TaskCursor.of(first[-1]))

    assert [t.id for t in first + second] == ids


async def test_filters_page_in_order(store: Store, fake_clock: FakeClock) -> None:
    ids = await _made(store, fake_clock, 12)
    claimed = {t.id for t in await store.claim_tasks(locked_by="s1", limit=5)}
    by_id = {t.id: t for t in await store.list_tasks(limit=100)}

    def expected(keep: Any) -> list[str]:
        return [i for i in ids if keep(by_id[i])]

    cases: list[tuple[dict[str, Any], Any]] = [
        ({"workflow": "wf-1"}, lambda t: t.workflow == "wf-1"),
        ({"states": [ProcessState.PENDING]}, lambda t: t.id not in claimed),
        (
            {"states": [ProcessState.PROCESSING, ProcessState.PENDING]},
            lambda t: True,
        ),
        (
            {"workflow": "wf-2", "states": [ProcessState.PROCESSING]},
            lambda t: t.workflow == "wf-2" and t.id in claimed,
        ),
        ({"key": "k7"}, lambda t: t.key == "k7"),
    ]
    for filters, keep in cases:
        assert await _walk(store, 2, **filters) == expected(keep), filters


async def test_filters_by_creation_time(store: Store, fake_clock: FakeClock) -> None:
    start = fake_clock.now()
    ids = await _made(store, fake_clock, 6)  # one per second, from `start`
    created = {t.id: t.created_at for t in await store.list_tasks(limit=10)}

    window = await store.list_tasks(
        created_from=start + timedelta(seconds=2), created_to=start + timedelta(seconds=4)
    )

    assert [t.id for t in window] == [
        i for i in ids if start + timedelta(seconds=2) <= created[i] < start + timedelta(seconds=4)
    ]
    assert len(window) == 2
    assert await store.list_tasks(created_from=fake_clock.now() + timedelta(days=1)) == []
    assert [t.id for t in await store.list_tasks(created_to=start + timedelta(seconds=1))] == [
        ids[-1]
    ]


async def test_id_prefix_is_exact_for_any_text(store: Store, fake_clock: FakeClock) -> None:
    ids = await _made(store, fake_clock, 5)

    for prefix in (ids[0][:3], ids[0][:12], ids[0]):
        assert [t.id for t in await store.list_tasks(id_prefix=prefix)] == [
            i for i in ids if i.startswith(prefix)
        ]
    for odd in ("z", "0" * 30, "\U0010ffff", "é", "%", "_"):
        assert await store.list_tasks(id_prefix=odd) == []


@pytest.mark.parametrize(
    ("filters", "field"),
    [
        ({"workflow": "a\0b"}, "workflow"),
        ({"key": "\ud800"}, "key"),
        ({"id_prefix": 12}, "id_prefix"),
        ({"created_from": datetime(2026, 1, 1)}, "created_from"),
        # Out of range once turned to UTC: the year 0, the year 10000.
        ({"created_from": datetime.fromisoformat("0001-01-01T00:00+14:00")}, "created_from"),
        ({"created_to": datetime.fromisoformat("9999-12-31T23:59-14:00")}, "created_to"),
        ({"created_to": "yesterday"}, "created_to"),
        ({"before": "0.abc"}, "before"),
        ({"states": ["nope"]}, "states"),
        ({"key": "k" * 2000}, "key"),
        ({"limit": "5"}, "limit"),
        ({"limit": True}, "limit"),
        ({"limit": 2.5}, "limit"),
    ],
)
async def test_a_malformed_filter_is_refused_naming_it(
    store: Store, filters: dict[str, Any], field: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        await store.list_tasks(**filters)
    assert caught.value.field == field


async def test_a_limit_past_what_a_store_holds_lists_everything(store: Store) -> None:
    task_id = (await store.submit_task(new_task("wf"))).task_id
    assert [t.id for t in await store.list_tasks(limit=10**30)] == [task_id]
    both = [ProcessState.PENDING, ProcessState.ERROR]
    assert [t.id for t in await store.list_tasks(limit=10**30, states=both)] == [task_id]


async def test_states_may_be_given_as_their_names(store: Store) -> None:
    task_id = (await store.submit_task(new_task("wf"))).task_id
    found = await store.list_tasks(states=["pending"])  # type: ignore[list-item]
    assert [t.id for t in found] == [task_id]


async def test_a_cursor_far_in_the_past_or_future_lists_accordingly(store: Store) -> None:
    task_id = (await store.submit_task(new_task("wf"))).task_id
    old = TaskCursor(created_at=datetime(1971, 1, 1, tzinfo=UTC), task_id="0")
    new = TaskCursor(created_at=datetime(2999, 1, 1, tzinfo=UTC), task_id="0")

    assert await store.list_tasks(before=old) == []
    assert [t.id for t in await store.list_tasks(before=new)] == [task_id]


async def test_a_prefix_many_ids_share_lists_the_same(
    store: Store, fake_clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The list walks the order index instead of the id range once "many" ids share a prefix.
    monkeypatch.setattr(task_filters, "MANY_IDS", 2)
    ids = await _made(store, fake_clock, 7)

    for prefix in (ids[0][:2], ids[3], ids[0][:12], "f"):
        expected = [i for i in ids if i.startswith(prefix)]
        assert [t.id for t in await store.list_tasks(id_prefix=prefix)] == expected
        assert await _walk(store, 2, id_prefix=prefix) == expected


@pytest.mark.parametrize("many_ids", [False, True])
async def test_every_combination_of_filters_lists_what_matches_all_of_them(
    store: Store, fake_clock: FakeClock, monkeypatch: pytest.MonkeyPatch, many_ids: bool
) -> None:
    # Each filter alone is served by an index; with a key or an id range, the others
    # are checked on the rows found. Whatever the plan, the answer is the same.
    if many_ids:  # an id prefix is "shared by many ids": no range
        monkeypatch.setattr(task_filters, "MANY_IDS", 1)
    ids = await _made(store, fake_clock, 9, same_instant=2)
    await store.claim_tasks(locked_by="s1", limit=4)
    every = await store.list_tasks(limit=100)
    assert [t.id for t in every] == ids
    middle = every[4]
    options: dict[str, list[Any]] = {
        "key": [None, middle.key],
        "id_prefix": [None, middle.id[:3], middle.id[:12], middle.id],
        "workflow": [None, middle.workflow],
        "states": [[], [middle.process_state], [ProcessState.PENDING, ProcessState.PROCESSING]],
        "created_from": [None, middle.created_at],
        "before": [None, TaskCursor.of(every[2])],
    }

    def matches(task: Task, filters: dict[str, Any]) -> bool:
        before = filters["before"]
        return (
            filters["key"] in (None, task.key)
            and (filters["id_prefix"] is None or task.id.startswith(filters["id_prefix"]))
            and filters["workflow"] in (None, task.workflow)
            and (not filters["states"] or task.process_state in filters["states"])
            and (filters["created_from"] is None or task.created_at >= filters["created_from"])
            and (before is None or (task.created_at, task.id) < (before.created_at, before.task_id))
        )

    combos: list[dict[str, Any]] = [{}]
    for name, values in options.items():
        combos = [{**combo, name: value} for combo in combos for value in values]
    for filters in combos:
        expected = [t.id for t in every if matches(t, filters)]
        given = {k: v for k, v in filters.items() if v not in (None, [])}
        assert [t.id for t in await store.list_tasks(**given)] == expected, given
