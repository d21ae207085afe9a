"""An operator's action on many tasks at once: what it is, what it records, what it reports.

A bulk action (retry the tasks in `error`, acknowledge their open alerts)
acts on a list of task ids fixed when the operator confirmed it, at most
`MAX_BULK` of them, in one store write. Each task it acts on records the
action in its history (`BulkMark.detail`: which bulk action, of how many
tasks); a task whose state changed since the list was fixed is refused, with
why, and the others go on. `BulkOutcome` is what the operator is told, and
what an `Idempotency-Key` replays (`to_json` / `from_json`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, final

if TYPE_CHECKING:
    from shepherd.core.records import JsonValue

__all__ = ["MAX_BULK", "BulkAction", "BulkMark", "BulkOutcome", "Refusal", "TaskCount"]

#: The most tasks one bulk action acts on (and the count a task list shows exactly).
MAX_BULK = 10_000


class BulkAction(StrEnum):
    """What a bulk action does to each of its tasks."""

    #: Retry each task in `error` from its failed step, with its own payloads.
    RETRY = "retry"
    #: Acknowledge each task's open alerts.
    ACKNOWLEDGE = "acknowledge"


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class BulkMark:
    """Which bulk action an event belongs to: its id, and how many tasks it was given."""

    bulk: str
    of: int

    def detail(self) -> dict[str, JsonValue]:
        """The event detail's fields for it: `{"bulk": id, "of": N}`."""
        return {"bulk": self.bulk, "of": self.of}


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Refusal:
    """A task a bulk action did not act on, and why (its state changed, it is gone...)."""

    task_id: str
    reason: str


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class BulkOutcome:
    """What a bulk action did: the tasks it acted on, and those it refused, in the order given.

    Attributes:
        action: What it did.
        bulk: Its id, recorded in each task's history (`BulkMark`).
        done: The tasks it acted on.
        refused: The tasks it did not act on, each with why.
        alerts: For `acknowledge`, how many alerts it acknowledged in all.
        replayed: Whether this is the stored outcome of an earlier request
            with the same idempotency key (this one changed nothing).
    """

    action: BulkAction
    bulk: str
    done: tuple[str, ...]
    refused: tuple[Refusal, ...]
    alerts: int = 0
    replayed: bool = False

    @property
    def of(self) -> int:
        """How many tasks it was given."""
        return len(self.done) + len(self.refused)

    def to_json(self) -> dict[str, JsonValue]:
        """The outcome as a JSON object (the reply of the JSON API, and what a key replays)."""
        out: dict[str, JsonValue] = {
            "action": self.action.value,
            "bulk": self.bulk,
            "of": self.of,
            "done": len(self.done),
            "done_ids": list(self.done),
            "refused": [{"task_id": r.task_id, "reason": r.reason} for r in self.refused],
        }
        if self.action is BulkAction.ACKNOWLEDGE:
            out["alerts"] = self.alerts
        return out

    @classmethod
    def from_json(cls, value: JsonValue) -> BulkOutcome:
        """The outcome `to_json` gave `value` for.

        Raises:
            ValueError: `value` is not such an object.
        """
        if not isinstance(value, dict):
            raise ValueError("a bulk outcome is a JSON object")
        try:
            done, refused = value["done_ids"], value["refused"]
            if not isinstance(done, list) or not isinstance(refused, list):
                raise TypeError
            alerts = value.get("alerts", 0)
            return cls(
                action=BulkAction(str(value["action"])),
                bulk=str(value["bulk"]),
                done=tuple(str(task_id) for task_id in done),
                refused=tuple(_refusal(r) for r in refused),
                alerts=alerts if isinstance(alerts, int) else 0,
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a bulk outcome: {exc}") from None


def _refusal(value: JsonValue) -> Refusal:
    if not isinstance(value, dict):
        raise TypeError("a refusal is a JSON object")
    return Refusal(task_id=str(value["task_id"]), reason=str(value["reason"]))


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class TaskCount:
    """How many tasks match a filter: exact up to a cap, then "more than the cap".

    Attributes:
        count: The count, or the cap when `more`.
        more: Whether more than `count` match.
    """

    count: int
    more: bool

    def shown(self) -> str:
        """`1,234`, or `10,000+` past the cap."""
        return f"{self.count:,}" + ("+" if self.more else "")
