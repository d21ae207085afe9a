"""The demo's simulated remote services: inventory, payments and shipping.

Each service keeps its state in its own small SQLite file (the *ledger*), apart
from shepherd's state store, because a real remote service outlives the agent
that calls it: when `--crash` kills the worker process, stock levels, charges
and shipments survive, and a re-executed step meets the record its first
execution left behind. Every side effect is keyed by the request's idempotency
key, so a step that runs twice takes effect once; the ledger counts each such
duplicate that was prevented.

Faults are injected per call at configurable rates: transient failures (before
or after the side effect), slow answers that arrive after `complete_by`, calls
that hang forever, and declined cards.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import sqlite3
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, final

from shepherd.core.records import JsonValue
from shepherd.errors import PermanentError, TransientError

_SCHEMA = """
CREATE TABLE IF NOT EXISTS stock (sku TEXT PRIMARY KEY, level INTEGER NOT NULL,
    initial INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS reservations (key TEXT PRIMARY KEY, order_id TEXT NOT NULL,
    state TEXT NOT NULL, items TEXT NOT NULL DEFAULT '[]');
CREATE TABLE IF NOT EXISTS charges (key TEXT PRIMARY KEY, order_id TEXT NOT NULL,
    state TEXT NOT NULL, amount_cents INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS shipments (key TEXT PRIMARY KEY, order_id TEXT NOT NULL,
    state TEXT NOT NULL, tracking TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
"""


#: States of a record whose side effect is in force (and can be undone).
_ACTIVE = frozenset({"reserved", "charged", "created"})


class Fault(Enum):
    """What goes wrong with one call."""

    NONE = "none"
    TRANSIENT_BEFORE = "transient"  # refused before the service did anything
    TRANSIENT_AFTER = "transient_after_commit"  # done, but the answer was lost
    SLOW = "slow"  # done, but the answer arrives after complete_by
    HANG = "hung"  # never answers


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class FaultRates:
    """Probabilities, per call, of each injected fault (and per order, of a decline)."""

    transient: float = 0.05
    slow: float = 0.01
    hang: float = 0.005
    decline: float = 0.03

    def __post_init__(self) -> None:
        for name in ("transient", "slow", "hang", "decline"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"--{name}-rate must be between 0 and 1, not {value}")
        if self.transient + self.slow + self.hang > 1.0:
            raise ValueError("the transient, slow and hang rates must add up to at most 1")


@final
class Ledger:
    """The services' own database: one short transaction per operation."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.conn = sqlite3.connect(path, isolation_level=None, timeout=30.0)
        self.conn.execute("PRAGMA journal_mode = WAL")
        # A process crash loses nothing at OFF; only an OS crash could, and this is a simulation.
        self.conn.execute("PRAGMA synchronous = OFF")
        self.conn.executescript(_SCHEMA)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """`BEGIN IMMEDIATE` ... `COMMIT`, or `ROLLBACK` on any exception."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def bump(self, name: str, by: int = 1) -> None:
        """Add `by` to the counter `name`."""
        self.conn.execute(
            "INSERT INTO counters VALUES (?, ?) "
            "ON CONFLICT (name) DO UPDATE SET value = value + excluded.value",
            (name, by),
        )

    def counters(self) -> dict[str, int]:
        """Every counter's value."""
        return dict(self.conn.execute("SELECT name, value FROM counters").fetchall())

    def stock_up(self, levels: Mapping[str, int]) -> None:
        """Set the initial stock of each SKU (once; later calls change nothing)."""
        with self.transaction() as db:
            db.executemany(
                "INSERT OR IGNORE INTO stock VALUES (?, ?, ?)",
                [(sku, units, units) for sku, units in levels.items()],
            )

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()


@final
class Services:
    """The three remote services, with fault injection, over one ledger."""

    def __init__(
        self, ledger: Ledger, rates: FaultRates, *, seed: int, stream: int, slow_seconds: float
    ) -> None:
        """Services over `ledger`; `seed` picks the declined cards, `seed` and `stream` the faults."""
        self.ledger = ledger
        self.rates = rates
        self.seed = seed
        self.slow_seconds = slow_seconds
        self.rng = random.Random(f"{seed}:faults:{stream}")

    def draw(self) -> Fault:
        """The fault for the next call."""
        r = self.rng.random()
        rates = self.rates
        if r < rates.hang:
            return Fault.HANG
        if r < rates.hang + rates.slow:
            return Fault.SLOW
        if r < rates.hang + rates.slow + rates.transient:
            return Fault.TRANSIENT_BEFORE if self.rng.random() < 0.5 else Fault.TRANSIENT_AFTER
        return Fault.NONE

    async def call(self, service: str, effect: Callable[[], JsonValue]) -> JsonValue:
        """Call `service`: a little network latency, maybe a fault, and the side effect."""
        await asyncio.sleep(self.rng.uniform(0.0, 0.003))
        fault = self.draw()
        if fault is not Fault.NONE:
            self.ledger.bump(f"fault_{fault.value}")
        if fault is Fault.HANG:
            await asyncio.Event().wait()
        if fault is Fault.TRANSIENT_BEFORE:
            raise TransientError(f"{service}: 503 service unavailable")
        result = effect()
        if fault is Fault.TRANSIENT_AFTER:
            raise TransientError(f"{service}: connection reset before the answer arrived")
        if fault is Fault.SLOW:
            await asyncio.sleep(self.slow_seconds)
        return result

    def _seen(self, db: sqlite3.Connection, table: str, key: str) -> Any:
        row = db.execute(f"SELECT state, * FROM {table} WHERE key = ?", (key,)).fetchone()
        if row is not None:
            self.ledger.bump("duplicates_prevented")
        return row

    def _undo(
        self,
        table: str,
        key: str,
        order_id: str,
        undone: str,
        effect: Callable[[sqlite3.Connection, str], None] | None = None,
    ) -> JsonValue:
        """Undo the side effect recorded under `key`, once; tombstone one never made.

        The tombstone matters when the forward call's outcome is unknown: a late
        forward call with that key then finds the record and does nothing.
        """
        with self.ledger.transaction() as db:
            row = db.execute(f"SELECT state FROM {table} WHERE key = ?", (key,)).fetchone()
            if row is None:
                db.execute(
                    f"INSERT INTO {table} (key, order_id, state) VALUES (?, ?, ?)",
                    (key, order_id, undone),
                )
                return {"key": key, "state": undone, "found": False}
            state = row[0]
            if state == undone:
                self.ledger.bump("duplicates_prevented")
            elif state in _ACTIVE:
                if effect is not None:
                    effect(db, key)
                db.execute(f"UPDATE {table} SET state = ? WHERE key = ?", (undone, key))
                state = undone
        return {"key": key, "state": state, "found": True}

    # -- inventory ---------------------------------------------------------
    def reserve(self, key: str, order: Mapping[str, Any]) -> JsonValue:
        """Take the order's items off the shelves, once per key."""
        with self.ledger.transaction() as db:
            if (row := self._seen(db, "reservations", key)) is not None:
                return {"reservation": key, "state": row[0]}
            for item in order["items"]:
                if not db.execute(
                    "UPDATE stock SET level = level - ? WHERE sku = ? AND level >= ?",
                    (item["qty"], item["sku"], item["qty"]),
                ).rowcount:
                    raise PermanentError(f"out of stock: {item['sku']}")
            db.execute(
                "INSERT INTO reservations VALUES (?, ?, 'reserved', ?)",
                (key, order["order_id"], json.dumps(order["items"])),
            )
        return {"reservation": key, "state": "reserved"}

    def release(self, key: str, order_id: str) -> JsonValue:
        """Put the items of the reservation made under `key` back on the shelves."""

        def restock(db: sqlite3.Connection, key: str) -> None:
            (items,) = db.execute("SELECT items FROM reservations WHERE key = ?", (key,)).fetchone()
            db.executemany(
                "UPDATE stock SET level = level + ? WHERE sku = ?",
                [(item["qty"], item["sku"]) for item in json.loads(items)],
            )

        return self._undo("reservations", key, order_id, "released", restock)

    # -- payments ----------------------------------------------------------
    def charge(self, key: str, order: Mapping[str, Any]) -> JsonValue:
        """Charge the card once per key; some cards are declined (decided per order)."""
        with self.ledger.transaction() as db:
            row = self._seen(db, "charges", key)
            if row is None:
                order_id = str(order["order_id"])
                declined = (
                    random.Random(f"{self.seed}:decline:{order_id}").random() < self.rates.decline
                )
                state = "declined" if declined else "charged"
                db.execute(
                    "INSERT INTO charges VALUES (?, ?, ?, ?)",
                    (key, order_id, state, order["amount_cents"]),
                )
                if declined:
                    self.ledger.bump("declined")
            else:
                state = row[0]
        if state == "declined":
            raise PermanentError("card declined")
        return {"charge": key, "state": state, "amount_cents": order["amount_cents"]}

    def refund(self, key: str, order_id: str) -> JsonValue:
        """Refund the charge made under `key` (a declined one stays declined)."""
        return self._undo("charges", key, order_id, "refunded")

    # -- shipping ----------------------------------------------------------
    def ship(self, key: str, order: Mapping[str, Any]) -> JsonValue:
        """Create the shipment once per key."""
        with self.ledger.transaction() as db:
            if (row := self._seen(db, "shipments", key)) is not None:
                return {"tracking": row[-1], "state": row[0]}
            tracking = f"TRK-{zlib.crc32(key.encode()):010d}"
            db.execute(
                "INSERT INTO shipments VALUES (?, ?, 'created', ?)",
                (key, order["order_id"], tracking),
            )
        return {"tracking": tracking, "state": "created"}

    def cancel_shipment(self, key: str, order_id: str) -> JsonValue:
        """Cancel the shipment created under `key`."""
        return self._undo("shipments", key, order_id, "cancelled")
