"""Migrations: applied once, on first open; opening again changes nothing.

A store opened without migrating (`migrate=False`: the operator's commands)
uses a current store as it is, and refuses anything else, unchanged.
"""

from __future__ import annotations

import os
import re
import uuid
from typing import TYPE_CHECKING

import pytest

from shepherd.errors import StoreNotFoundError
from shepherd.store import open_store
from shepherd.store.migrations import migrations
from support.factories import new_task
from support.unusable_stores import KINDS, fingerprint, prepare

if TYPE_CHECKING:
    from pathlib import Path

    from shepherd.store.contract import Store
    from support.factories import Backend, Stores
    from support.postgres import MakePostgresUrl


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


# -- opened without migrating: a current store is used as it is; anything else is refused ----
async def test_a_store_opened_without_migrating_uses_a_current_store(
    backend: Backend, stores: Stores, store: Store
) -> None:
    submitted = await store.submit_task(new_task("wf", {"kept": True}, key="k"))
    await store.close()

    reader = open_store(stores.url, migrate=False)
    try:
        await reader.open()
        task = await reader.get_task(submitted.task_id)
        assert task is not None
        assert task.input == {"kept": True}
        # ... and writes there as the operator's commands do.
        await reader.submit_task(new_task("wf", key="k2"))
    finally:
        await reader.close()
    expected = [version for version, _, _ in migrations(backend.name)]
    assert await backend.applied_migrations(stores.url) == expected


def _empty_place(backend: Backend, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A SQLite path where no file is yet, or an empty PostgreSQL database."""
    if backend.name == "sqlite":
        return f"sqlite:///{tmp_path}/{uuid.uuid4().hex}.db"
    make: MakePostgresUrl = request.getfixturevalue("make_postgres_url")
    return make(empty=True)


@pytest.mark.parametrize("kind", sorted(set(KINDS) - {"missing"}))
async def test_a_store_opened_without_migrating_refuses_what_it_cannot_use_unchanged(
    backend: Backend, request: pytest.FixtureRequest, tmp_path: Path, kind: str
) -> None:
    url = _empty_place(backend, request, tmp_path)
    await prepare(kind, url)
    before = fingerprint(url)
    expected = KINDS[kind]

    store = open_store(url, migrate=False)
    with pytest.raises(expected.error, match=re.escape(expected.says)):
        await store.open()
    await store.close()

    assert fingerprint(url) == before


async def test_a_missing_sqlite_file_is_not_created(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/missing.db"

    store = open_store(url, migrate=False)
    with pytest.raises(StoreNotFoundError, match=r"no SQLite store at .*the file does not exist"):
        await store.open()
    await store.close()

    assert os.listdir(tmp_path) == [], "opening created files"


async def test_a_migrating_open_still_creates_and_migrates(
    backend: Backend, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url = _empty_place(backend, request, tmp_path)
    await prepare("too_old", url)

    for place in (url, _empty_place(backend, request, tmp_path)):
        store = open_store(place)
        await store.open()
        await store.close()
        expected = [version for version, _, _ in migrations(backend.name)]
        assert await backend.applied_migrations(place) == expected
