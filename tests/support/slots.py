"""The capacity slots a store holds, read straight from its table (the store lists none)."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from dataclasses import dataclass
from datetime import datetime

import psycopg

_HELD = (
    "SELECT holder, expires_at FROM resource_slots WHERE resource = {mark} "
    "ORDER BY acquired_at, holder"
)


@dataclass(frozen=True)
class HeldSlot:
    """One slot as stored: its holder, and when its lease ends (seconds since the epoch)."""

    holder: str
    expires_at: float


async def held_slots(store_url: str, resource: str) -> list[HeldSlot]:
    """The slots of `resource` in the store (expired ones too, until a taker deletes them)."""
    if store_url.startswith("sqlite:///"):
        path = store_url.removeprefix("sqlite:///")
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
            rows = conn.execute(_HELD.format(mark="?"), (resource,)).fetchall()
    else:
        async with await psycopg.AsyncConnection.connect(store_url) as conn:
            cursor = await conn.execute(_HELD.format(mark="%s"), (resource,))
            rows = await cursor.fetchall()
    return [
        HeldSlot(str(holder), at.timestamp() if isinstance(at, datetime) else float(at))
        for holder, at in rows
    ]
