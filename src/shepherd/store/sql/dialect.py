"""How the SQLite and PostgreSQL statements of one operation differ, so that it is written once.

A statement is written once as a template: `?` for each parameter, and a hook
in braces where the dialects differ in a word:

* `{now}`: the batch's (or the read's) instant, one parameter: `?` on
  SQLite (unix seconds); on PostgreSQL `coalesce(%s::timestamptz, now())`, so
  that None stands for the transaction's `now()`.
* `{seconds}`, after an expression of seconds: nothing on SQLite (instants
  are seconds), `* interval '1 second'` on PostgreSQL.
* `{greatest}`: `max` on SQLite, `greatest` on PostgreSQL.
* `{for_update}`, `{for_share}`, `{skip_locked}` (`FOR UPDATE SKIP
  LOCKED`): PostgreSQL's row locks at the end of a SELECT; nothing on SQLite,
  whose write transaction holds the database's write lock throughout.
* `{int}`, `{bigint}`, `{float}`, `{text}`, `{ts}`, after a `?`: the
  parameter's type, where PostgreSQL cannot tell it from the statement (a
  bare `?` compared with NULL); nothing on SQLite.
* `{changed}`, at the end of an UPDATE or a DELETE that `plan.changed` runs:
  nothing on SQLite, which counts the rows it changed; ` RETURNING 1` on
  PostgreSQL, whose rows are counted.
* `{by_deadline}`, after `FROM tasks`: ` INDEXED BY tasks_deadline` on SQLite,
  whose planner would otherwise walk every pending task by `tasks_state`;
  nothing on PostgreSQL, whose statistics find the partial index.
* `{list}`: a list of values as one condition (`column {list}`): `IN (?, ...)`
  on SQLite, one mark per value, or `= ANY(%s::text[])` on PostgreSQL, one
  array (`Dialect.listed`).

`Dialect.sql` turns a template into the backend's text, once per template.
The time types differ too: SQLite stores unix seconds (REAL), PostgreSQL
timestamptz; `instant` and `stored` convert, `later` adds seconds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar, final

from shepherd.store.rows import Instant, Records, unix_instant

__all__ = ["POSTGRES", "SQLITE", "Dialect"]

T = TypeVar("T")

#: Most `?` marks in one SQLite `IN (...)` list (its statements take a limited
#: number of parameters).
_CHUNK = 500


class _Hooks(dict[str, str]):
    """The hooks of a template; one it does not know (`{list}`) is left for later."""

    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


@final
@dataclass(frozen=True, slots=True, eq=False)
class Dialect:
    """One backend's words for the hooks of a template, and its time type.

    Attributes:
        name: `sqlite` or `postgres`.
        mark: The placeholder of a parameter.
        hooks: Each hook's text (see the module's docstring).
        arrays: Whether a list is one parameter (`= ANY(...)`), or one per value.
        instant: The stored time to an aware UTC datetime.
        stored: An aware datetime to the stored time.
        later: The stored instant `at` plus `seconds`.
        between: Seconds from the stored instant `earlier` to `later`.
        limit: A LIMIT's parameter for a count (a negative one: no limit).
        records: Records from rows, with `instant`.
    """

    name: str
    mark: str
    hooks: dict[str, str]
    arrays: bool
    instant: Instant
    stored: Callable[[datetime], Any]
    later: Callable[[Any, float], Any]
    between: Callable[[Any, Any], float]
    limit: Callable[[int], int | None]
    records: Records = field(init=False)
    _texts: dict[str, str] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "records", Records(self.instant))

    def sql(self, template: str) -> str:
        """The backend's text of `template` (made once, then looked up)."""
        text = self._texts.get(template)
        if text is None:
            text = template.format_map(_Hooks(self.hooks))
            if self.mark != "?":
                text = text.replace("%", "%%").replace("?", self.mark)
            self._texts[template] = text
        return text

    def listed(
        self, template: str, values: Sequence[object], kind: str = "text"
    ) -> tuple[str, list[object]]:
        """The text of `template` whose `{list}` stands for `values`, and their parameters.

        Before it, the parameters the text takes are the template's own up to
        `{list}`; `values` take its place (`kind` is their PostgreSQL type).
        """
        text = self.sql(template)
        if self.arrays:
            return text.replace("{list}", f"= ANY({self.mark}::{kind}[])"), [list(values)]
        marks = ", ".join("?" * len(values))
        return text.replace("{list}", f"IN ({marks})"), list(values)

    def chunks(self, items: Sequence[T]) -> list[list[T]]:
        """`items` as the lists one `{list}` takes: all at once, or at most 500 (none if empty)."""
        if self.arrays:
            return [list(items)] if items else []
        return [list(items[i : i + _CHUNK]) for i in range(0, len(items), _CHUNK)]


def _utc(value: datetime) -> datetime:
    return value.astimezone(UTC)


def _timestamp(value: datetime) -> float:
    return value.timestamp()


def _same(value: datetime) -> datetime:
    return value


def _plus(at: float, seconds: float) -> float:
    return at + seconds


def _plus_delta(at: datetime, seconds: float) -> datetime:
    return at + timedelta(seconds=seconds)


def _limit(limit: int) -> int:
    return limit  # LIMIT -1 is no limit


def _limit_or_none(limit: int) -> int | None:
    return None if limit < 0 else limit  # LIMIT NULL is no limit


def _minus(later: float, earlier: float) -> float:
    return later - earlier


def _minus_delta(later: datetime, earlier: datetime) -> float:
    return (later - earlier).total_seconds()


_TYPES = ("int", "bigint", "float", "text", "ts")

#: SQLite: `?`, unix seconds.
SQLITE = Dialect(
    name="sqlite",
    mark="?",
    hooks={
        "now": "?",
        "seconds": "",
        "greatest": "max",
        "by_deadline": " INDEXED BY tasks_deadline",
        **dict.fromkeys(("for_update", "for_share", "skip_locked", "changed", *_TYPES), ""),
    },
    arrays=False,
    instant=unix_instant,
    stored=_timestamp,
    later=_plus,
    between=_minus,
    limit=_limit,
)
#: PostgreSQL: `%s`, timestamptz.
POSTGRES = Dialect(
    name="postgres",
    mark="%s",
    hooks={
        "now": "coalesce(?::timestamptz, now())",
        "seconds": " * interval '1 second'",
        "greatest": "greatest",
        "by_deadline": "",
        "for_update": " FOR UPDATE",
        "for_share": " FOR SHARE",
        "skip_locked": " FOR UPDATE SKIP LOCKED",
        "changed": " RETURNING 1",
        "int": "::integer",
        "bigint": "::bigint",
        "float": "::float8",
        "text": "::text",
        "ts": "::timestamptz",
    },
    arrays=True,
    instant=_utc,
    stored=_same,
    later=_plus_delta,
    between=_minus_delta,
    limit=_limit_or_none,
)
