"""An operation written once: a plan yields its statements, and a backend runs them.

A plan is a generator. Each `yield` hands the backend a list of statements
(`Query`) and gets back each one's rows, in order; what it returns is the
operation's outcome. What it reads decides what it writes next, as in
`resource_writes`, but a yield may hold many statements: PostgreSQL sends them
all in its pipeline, then reads their rows (one round trip, however many),
while SQLite runs them one after another in its write turn. A statement whose
rows the plan does not need (`rows=False`) is sent and not waited for on
PostgreSQL (its rows come back empty), so a plan makes exactly the round trips
the handler it replaces made.

`run` and `run_async` drive a plan for a backend; the backend's `Batch.run`
(and its read runner) give them the way to run one yield's statements.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeAlias, TypeVar

if TYPE_CHECKING:
    from shepherd.core.records import JsonValue
    from shepherd.store.sql.dialect import Dialect

__all__ = [
    "Plan",
    "Query",
    "Rows",
    "Writing",
    "changed",
    "count_changed",
    "each",
    "first",
    "one",
    "run",
    "run_async",
    "send",
]

T = TypeVar("T")


class Query(NamedTuple):
    """A statement in its backend's text, its parameters, and whether the plan reads its rows."""

    sql: str
    params: Sequence[Any] = ()
    rows: bool = True
    #: Whether `params` is a list of parameter sets, one run each: SQLite's
    #: `executemany`, PostgreSQL's statements sent together. Its rows, if read,
    #: are one: how many rows it changed in all (the template ends in `{changed}`).
    many: bool = False


#: A statement's rows, as tuples.
Rows: TypeAlias = list[tuple[Any, ...]]
#: One operation's statements, yielded a list at a time, each list sent its rows.
Plan: TypeAlias = Generator[list[Query], list[Rows], T]


class Writing(Protocol):
    """What a write plan needs of a backend's batch."""

    rings: set[str]
    #: The most bytes a payload may take as JSON text.
    payload_limit: int

    @property
    def dialect(self) -> Dialect:
        """The backend's SQL."""
        ...

    @property
    def now(self) -> Any:
        """The batch's instant, in the backend's time type."""
        ...

    @property
    def instant(self) -> Any:
        """The batch's instant as the parameter of a `{now}` (None: the transaction's `now()`)."""
        ...

    def encode(self, value: JsonValue) -> str | Exception:
        """Encode a payload, or the error that refuses it."""
        ...

    def dumps(self, value: JsonValue) -> str:
        """Encode a payload; raise `PayloadError` if it is refused."""
        ...

    def dumps_error(self, value: JsonValue) -> str:
        """Encode an error body, cut to the limit, never refused."""
        ...

    def event(
        self, task_id: str, key: str | None, reply_to: str | None, kind: str, detail: str
    ) -> None:
        """Append an event (detail is JSON text) to the log, in call order."""
        ...


def one(sql: str, params: Sequence[object] = ()) -> Generator[list[Query], list[Rows], Rows]:
    """Run one statement: its rows."""
    (rows,) = yield [Query(sql, params)]
    return rows


def first(
    sql: str, params: Sequence[object] = ()
) -> Generator[list[Query], list[Rows], tuple[Any, ...] | None]:
    """Run one statement: its first row, or None."""
    (rows,) = yield [Query(sql, params)]
    return rows[0] if rows else None


def send(sql: str, params: Sequence[object] = ()) -> Generator[list[Query], list[Rows], None]:
    """Run one statement whose rows are not needed (PostgreSQL does not wait for it)."""
    yield [Query(sql, params, rows=False)]


def each(sql: str, params: Sequence[Sequence[object]]) -> Query:
    """One statement run once per parameter set, whose rows are not needed."""
    return Query(sql, params, rows=False, many=True)


def changed(sql: str, params: Sequence[Sequence[object]]) -> Query:
    """One statement run once per parameter set; its one row: `(rows changed in all,)`.

    The statement's template ends in `{changed}`.
    """
    return Query(sql, params, many=True)


def count_changed(
    sql: str, params: Sequence[Sequence[object]]
) -> Generator[list[Query], list[Rows], int]:
    """Run `changed`: how many rows the statement changed, in all."""
    (((count,),),) = yield [changed(sql, params)]
    return int(count)


def run(plan: Plan[T], execute: Callable[[Query], Rows]) -> T:
    """Drive `plan`, running each statement with `execute` (its rows), one after another."""
    try:
        queries = next(plan)
        while True:
            queries = plan.send([execute(query) for query in queries])
    except StopIteration as done:
        outcome: T = done.value
        return outcome


async def run_async(plan: Plan[T], execute: Callable[[list[Query]], Awaitable[list[Rows]]]) -> T:
    """Drive `plan`, running each yield's statements with `execute` (all of them at once)."""
    try:
        queries = next(plan)
        while True:
            queries = plan.send(await execute(queries))
    except StopIteration as done:
        outcome: T = done.value
        return outcome
