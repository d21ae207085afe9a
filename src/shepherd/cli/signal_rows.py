"""A task's signals as `shepherd show` prints them: a table, or JSON."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from shepherd.cli import render
from shepherd.cli.tables import Column, echo_table, terminal_width

if TYPE_CHECKING:
    from shepherd.core.records import JsonValue
    from shepherd.core.signalling import Signal

__all__ = ["echo_signals", "signals_json"]

_COLUMNS = (
    Column("id", right=True),
    Column("name"),
    Column("sent_at"),
    Column("consumed by step", right=True),
    Column("payload", "wide"),
)


def signals_json(signals: list[Signal]) -> JsonValue:
    """A task's signals as `shepherd show --json` prints them."""
    return [
        {
            "id": s.id,
            "name": s.name,
            "payload": s.payload,
            "idempotency_key": s.idempotency_key,
            "sent_at": s.sent_at.isoformat(),
            "consumed_seq": s.consumed_seq,
            "consumed_at": None if s.consumed_at is None else s.consumed_at.isoformat(),
        }
        for s in signals
    ]


def echo_signals(signals: list[Signal]) -> None:
    """A task's signals, as a section of `shepherd show` (nothing when it has none)."""
    if not signals:
        return
    click.echo()
    click.echo(click.style("signals", bold=True))
    rows = [
        (
            str(s.id),
            s.name,
            render.when(s.sent_at),
            "" if s.consumed_seq is None else str(s.consumed_seq),
            render.compact(s.payload),
        )
        for s in signals
    ]
    echo_table(_COLUMNS, rows, terminal_width())
