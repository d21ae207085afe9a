"""`shepherd.store.postgres.sqlstates`: each SQLSTATE's kind, and the error a caller gets for it."""

from __future__ import annotations

import pytest

from shepherd.errors import (
    PayloadError,
    ShepherdError,
    StoreDamagedError,
    StoreFullError,
    StoreUnavailableError,
)
from shepherd.store.postgres.sqlstates import Kind, error_for, kind_of

WHERE = "PostgreSQL store 127.0.0.1:5432/app"


@pytest.mark.parametrize(
    ("sqlstate", "kind"),
    [
        ("08006", Kind.UNAVAILABLE),  # connection failure
        ("08001", Kind.UNAVAILABLE),  # cannot connect
        ("57P01", Kind.UNAVAILABLE),  # admin shutdown
        ("57P02", Kind.UNAVAILABLE),  # crash shutdown
        ("57P03", Kind.UNAVAILABLE),  # cannot connect now
        ("57014", Kind.UNAVAILABLE),  # query cancelled
        ("53300", Kind.UNAVAILABLE),  # too many connections
        ("53200", Kind.UNAVAILABLE),  # out of memory
        ("53100", Kind.FULL),  # disk full
        ("55P03", Kind.UNAVAILABLE),  # lock not available
        ("40P01", Kind.UNAVAILABLE),  # deadlock (after the writer's retries)
        ("28P01", Kind.UNAVAILABLE),  # bad password
        ("3D000", Kind.UNAVAILABLE),  # no such database
        ("58030", Kind.UNAVAILABLE),  # I/O error
        ("XX001", Kind.DAMAGED),  # data corrupted
        ("XX002", Kind.DAMAGED),  # index corrupted
        ("54000", Kind.VALUE),  # program limit exceeded: an index row too large
        ("54001", Kind.VALUE),  # statement too complex
        ("22001", Kind.VALUE),  # string data right truncation
        ("22021", Kind.VALUE),  # character not in repertoire
        ("22012", Kind.VALUE),  # division by zero
        ("23505", Kind.REFUSED),  # unique violation
        ("42P01", Kind.REFUSED),  # undefined table
        ("XX000", Kind.REFUSED),  # internal error
        (None, Kind.UNAVAILABLE),  # the driver's own complaint (a broken socket)
    ],
)
def test_each_sqlstate_has_one_kind(sqlstate: str | None, kind: Kind) -> None:
    assert kind_of(sqlstate) is kind


def test_an_index_row_too_large_on_a_write_is_the_callers_value_not_unavailable() -> None:
    message = (
        'index row size 3024 exceeds btree version 4 maximum 2704 for index "tasks_workflow_key"'
    )

    error = error_for("54000", WHERE, message, writing=True)

    assert type(error) is PayloadError
    assert error.message == (
        f"{WHERE} refused a write (54000): {message} (a value it carried is not one the "
        "store can keep; nothing was written)"
    )


def test_a_value_refused_on_a_read_is_refused_not_a_payload_error() -> None:
    error = error_for("54000", WHERE, "too many parameters", writing=False)

    assert type(error) is ShepherdError
    assert error.message == f"{WHERE} refused a read (54000): too many parameters"


@pytest.mark.parametrize(
    ("sqlstate", "expected"),
    [
        ("57P01", StoreUnavailableError),
        ("08006", StoreUnavailableError),
        ("53300", StoreUnavailableError),
        ("53100", StoreFullError),
        ("XX001", StoreDamagedError),
        ("42P01", ShepherdError),
    ],
)
def test_each_kind_is_its_error(sqlstate: str, expected: type[ShepherdError]) -> None:
    for writing in (True, False):
        error = error_for(sqlstate, WHERE, "the server's words", writing=writing)
        assert type(error) is expected
        assert "the server's words" in error.message
        assert error.message.startswith(WHERE)


def test_a_refused_statement_names_what_was_refused() -> None:
    error = error_for(
        "42P07", WHERE, 'relation "tasks" already exists', writing=False, action="its migrations"
    )

    assert (
        error.message == f'{WHERE} refused its migrations (42P07): relation "tasks" already exists'
    )
