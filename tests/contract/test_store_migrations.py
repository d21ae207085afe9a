"""Migrations: applied once, on first open; opening again changes nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING

from shepherd.store.migrations import migrations
from support.factories import new_task

if TYPE_CHECKING:
    from shepherd.store.contract import Store
    from support.factories import Backend, Stores


async def test_opening_applies_every_migration_once(backend: Backend, stores: Stores) -> None:
    await stores.connect()

    expected = [version for version, _, _ in migrations(backend.name)]
    assert expected, "the backend ships no migrations"
    assert await backend.applied_migrations(stores.url) == expected


async def test_opening_again_is_idempotent_and_keeps_the_data(
    backend: Backend, stores: Stores, store: Store
) -> None:
    submitted = await store.submit_task(new_task("wf", {"kept": True}, key="k"))
    await store.close()

    again = await stores.connect()
    third = await stores.connect()  # while another connection is open
    await again.open()  # opening an open store is a no-op

    task = await third.get_task(submitted.task_id)
    assert task is not None
    assert task.input == {"kept": True}
    expected = [version for version, _, _ in migrations(backend.name)]
    assert await backend.applied_migrations(stores.url) == expected
    assert (await again.submit_task(new_task("wf", key="k"))).task_id == submitted.task_id
