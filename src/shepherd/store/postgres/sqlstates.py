"""What a PostgreSQL error means for a caller, decided by its SQLSTATE: one table.

psycopg files errors by its own classes (`OperationalError` holds a lost
connection and a too-long index row alike), so the store decides by the
SQLSTATE the server sent instead. A code's own entry wins over its class's
(the first two characters); a code in neither is refused. Pure: the writer and
the reader turn the kind into the error their caller gets (`error_for`).

    SQLSTATE                              kind          the caller gets
    08xxx connection exception            unavailable   StoreUnavailableError
    57xxx operator intervention (57P01    unavailable   StoreUnavailableError
      admin shutdown, 57P02 crash
      shutdown, 57P03 cannot connect
      now, 57014 query cancelled)
    53xxx insufficient resources (53300   unavailable   StoreUnavailableError
      too many connections, 53200 out
      of memory)
    53100 disk full                       full          StoreFullError
    55P03 lock not available, 25P03       unavailable   StoreUnavailableError
      idle in transaction timeout,
      40001 / 40P01 (retried first)
    28xxx authorization, 3D000 no such    unavailable   StoreUnavailableError
      database (the server refuses us)
    58xxx system error (I/O)              unavailable   StoreUnavailableError
    XX001 data corrupted, XX002 index     damaged       StoreDamagedError
      corrupted
    22xxx data exception, 54xxx program   value         PayloadError on a write (the
      limit exceeded (an index row too                  caller's value), else refused
      large)
    anything else (23xxx, 42xxx, XX000)   refused       ShepherdError naming the
                                                        store's message (not retried)
    none (the driver's own complaint)     unavailable   StoreUnavailableError

The same table is in docs/reference/errors.md.
"""

from __future__ import annotations

from enum import StrEnum

from shepherd.errors import (
    PayloadError,
    ShepherdError,
    StoreDamagedError,
    StoreFullError,
    StoreUnavailableError,
)

__all__ = ["Kind", "error_for", "kind_of"]


class Kind(StrEnum):
    """What an error means for its caller."""

    #: A passing condition of the server or the network: retry later.
    UNAVAILABLE = "unavailable"
    #: The server's disk is full: retry once space is freed.
    FULL = "full"
    #: The server found its data damaged: do not retry.
    DAMAGED = "damaged"
    #: A value the statement carried was refused (too large, malformed): do not retry.
    VALUE = "value"
    #: The statement was refused: do not retry.
    REFUSED = "refused"


#: Codes whose meaning differs from their class's.
_BY_CODE: dict[str, Kind] = {
    "53100": Kind.FULL,
    "55P03": Kind.UNAVAILABLE,
    "25P03": Kind.UNAVAILABLE,
    "40001": Kind.UNAVAILABLE,
    "40P01": Kind.UNAVAILABLE,
    "3D000": Kind.UNAVAILABLE,
    "XX001": Kind.DAMAGED,
    "XX002": Kind.DAMAGED,
}
#: Classes (the first two characters of a code).
_BY_CLASS: dict[str, Kind] = {
    "08": Kind.UNAVAILABLE,
    "28": Kind.UNAVAILABLE,
    "53": Kind.UNAVAILABLE,
    "57": Kind.UNAVAILABLE,
    "58": Kind.UNAVAILABLE,
    "22": Kind.VALUE,
    "54": Kind.VALUE,
}


def kind_of(sqlstate: str | None) -> Kind:
    """What an error with this SQLSTATE means (None: the driver's own, no server answer)."""
    if sqlstate is None:
        return Kind.UNAVAILABLE
    found = _BY_CODE.get(sqlstate)
    if found is not None:
        return found
    return _BY_CLASS.get(sqlstate[:2], Kind.REFUSED)


def error_for(
    sqlstate: str | None, where: str, message: str, *, writing: bool, action: str | None = None
) -> ShepherdError:
    """The error a caller gets for a statement that failed with `sqlstate`.

    Args:
        sqlstate: The server's code, or None for the driver's own complaint.
        where: The store as messages name it (`PostgreSQL store host:port/db`).
        message: The server's message, one line, without a password.
        writing: Whether the statement wrote the caller's values (a value
            refused then is the caller's: PayloadError; on a read it is ours).
        action: What was refused, as the message says it (default: `a write`
            or `a read`).
    """
    kind = kind_of(sqlstate)
    code = "" if sqlstate is None else f" ({sqlstate})"
    if kind is Kind.UNAVAILABLE:
        return StoreUnavailableError(f"{where}: {message}")
    if kind is Kind.FULL:
        return StoreFullError(
            f"{where}: the server's disk is full{code}: {message} "
            "(free space, then the roles resume by themselves)"
        )
    if kind is Kind.DAMAGED:
        return StoreDamagedError(
            f"{where} reports damaged data{code}: {message} (check the server, restore "
            "from a backup)"
        )
    if kind is Kind.VALUE and writing:
        return PayloadError(
            f"{where} refused a write{code}: {message} (a value it carried is not one the "
            "store can keep; nothing was written)"
        )
    if action is None:
        action = "a write" if writing else "a read"
    return ShepherdError(f"{where} refused {action}{code}: {message}")
