"""Child workflows: start one from a step, park the parent, end a child, cancel children.

The rules are `shepherd.core.children`'s; the statements `store.sql.children`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import KW_ONLY

from shepherd.core.records import JsonValue
from shepherd.store.ops.base import Runs, Write, method, operation
from shepherd.store.ops.claims import FailTask, FinishTask

__all__ = [
    "CancelChildren",
    "Children",
    "EndChild",
    "StartChild",
    "WaitChildren",
]


@operation
class StartChild(Write[str]):
    """The holder records child step `seq` and inserts the child task; the child's id.

    In one transaction, fenced by `locked_by` and `epoch` (else
    `StaleEpochError`, nothing written): the child task `child_id` (`pending`,
    claimable now), its `task_children` link,
    and the parent's step `seq` (kind `child`, its agent the child's
    workflow): `running` for an awaited child (`on_parent_end` `wait`), else
    `completed` with the child's id as its result. With `wait`, the parent also
    gives up its claim until the child ends (`WaitChildren`).

    Refused, nothing written: an input that is not JSON or over the payload
    limit (`PayloadError`); a chain deeper than `core.children.MAX_DEPTH` or a
    `key` another task of the workflow has (`ConfigError`).
    """

    task_id: str
    _: KW_ONLY
    locked_by: str
    epoch: int
    seq: int
    child_id: str
    workflow: str
    input: JsonValue
    key: str | None
    on_parent_end: str
    #: The child's claim window (its workflow's `complete_within`).
    complete_within: float
    wait: bool = False


@operation
class WaitChildren(Write[None]):
    """The holder gives up its claim while its workflow waits on the children of `seqs`.

    Fenced like `StartChild`. The task is `pending` and unowned; claimable at
    once if one of those steps has ended already, else when a child's end
    (`EndChild`) wakes it.
    """

    task_id: str
    _: KW_ONLY
    locked_by: str
    epoch: int
    seqs: Sequence[int]


@operation
class EndChild(Write[None]):
    """A child task's end (`end`, written as it is alone), and its awaited step's, together.

    In the transaction of `end`: if it was written and the task is an awaited
    child ending `processed`, `compensated` or `cancelled`, its parent's
    running step records the child's result, or fails with its reason
    (`core.children.step_outcome`); a parent waiting unclaimed becomes
    claimable now (the claimers are woken). A task with no parent ends as
    `end` alone ends it.
    """

    end: FinishTask | FailTask


@operation
class CancelChildren(Write[list[str]]):
    """The holder's task ends: cancel its children that go with it; their ids.

    Fenced like `StartChild` (else `StaleEpochError`, nothing written). Its
    unended children started with `cancel`, and awaited ones still running,
    turn `compensating` with `cancel_requested` and a reason naming the parent;
    so do all of theirs.
    """

    task_id: str
    _: KW_ONLY
    locked_by: str
    epoch: int


class Children(Runs):
    """The store's methods for child workflows."""

    start_child = method(StartChild)
    wait_children = method(WaitChildren)
    end_child = method(EndChild)
    cancel_children = method(CancelChildren)
