"""Submitting many tasks at once, for both backends: every input checked first, all or none.

A `SubmitTasks` operation refuses itself whole when one of its inputs does not
encode, before anything is written; the message names the task's index
(`submissions[3]: ...`). The operations of a batch that pass are inserted
together by the backend's single-submit code (`tasks.submit`'s insert), which
gives a key repeated in the batch the first one's task.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from shepherd.errors import ShepherdError

if TYPE_CHECKING:
    from shepherd.store.contract import NewTask
    from shepherd.store.encoding import Encoding
    from shepherd.store.ops import SubmitTasks

__all__ = ["Plan", "at_index", "encode_all"]

E = TypeVar("E", bound=BaseException)


def at_index(index: int, error: E) -> E:
    """`error`, its message now starting with the index of the submission it is about."""
    if isinstance(error, ShepherdError):
        error.args = (f"submissions[{index}]: {error.message}",)
    return error


def encode_all(encoding: Encoding, tasks: Sequence[NewTask]) -> list[str]:
    """Every task's input as JSON text.

    Raises:
        PayloadError: An input is not acceptable JSON or too large; the message
            names the first such task's index.
    """
    encoded = []
    for index, task in enumerate(tasks):
        try:
            encoded.append(encoding.dumps(task.input))
        except Exception as exc:
            raise at_index(index, exc) from None
    return encoded


@dataclass(slots=True)
class Plan:
    """The `SubmitTasks` operations of one batch as one list of tasks to insert.

    Attributes:
        outcomes: One per operation: its refusal, or None until `finish` fills it.
        tasks: The tasks of every operation not refused, in order.
        encoded: Their inputs as JSON text.
    """

    outcomes: list[object]
    tasks: list[NewTask] = field(default_factory=list)
    encoded: list[str | Exception] = field(default_factory=list)
    _spans: list[tuple[int, int, int]] = field(default_factory=list)

    @classmethod
    def of(cls, encoding: Encoding, ops: Sequence[SubmitTasks]) -> Plan:
        """Check every operation's inputs; keep the tasks of those that all encode."""
        plan = cls(outcomes=[None] * len(ops))
        for number, op in enumerate(ops):
            try:
                encoded = encode_all(encoding, op.tasks)
            except Exception as exc:
                plan.outcomes[number] = exc
                continue
            start = len(plan.tasks)
            plan.tasks.extend(op.tasks)
            plan.encoded.extend(encoded)
            plan._spans.append((number, start, len(plan.tasks)))
        return plan

    def finish(self, inserted: Sequence[object]) -> list[object]:
        """Each operation's outcome: the list of its tasks' outcomes.

        `inserted` holds one outcome per task of `tasks`. A task that failed
        after every input encoded (on PostgreSQL, its key's task vanished
        meanwhile) is raised: the batch is rolled back and the writer runs each
        operation alone, so no operation is ever half written.
        """
        for number, start, end in self._spans:
            mine = list(inserted[start:end])
            for index, outcome in enumerate(mine):
                if isinstance(outcome, BaseException):
                    raise at_index(index, outcome)
            self.outcomes[number] = mine
        return self.outcomes
