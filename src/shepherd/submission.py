"""What `App.submit` and `App.submit_many` check before the store is touched, how they write, and how they fail.

A `Submission` is one task for `submit_many`: the arguments `submit` takes.
Each is checked (a registered workflow, a `key` and a `reply_to` a store can
keep, its `Timing`: `core.timing`) before anything is written; a refusal names the submission's index.
`submit_one` and `submit_all` then write the tasks in one transaction, in a
`shepherd.submit` span when tracing is on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, replace
from typing import TYPE_CHECKING, Any, TypedDict, Unpack, final

from shepherd import tracing
from shepherd.core.timing import checked_deadline, checked_delay, checked_not_before
from shepherd.errors import CommitUnknownError, ConfigError, PayloadError, UnknownWorkflowError
from shepherd.payloads import check_text
from shepherd.store.contract import NewTask
from shepherd.store.submits import at_index

if TYPE_CHECKING:
    from datetime import datetime

    from shepherd.core.records import JsonValue
    from shepherd.scheduler import Workflow
    from shepherd.store.contract import Store

__all__ = [
    "Submission",
    "Timing",
    "commit_unknown",
    "new_task",
    "new_tasks",
    "submit_all",
    "submit_one",
]


@final
@dataclass(frozen=True, slots=True)
class Submission:
    """One task for `App.submit_many`: `Submission("orders.process", order, key=order["id"])`.

    Attributes:
        workflow: The registered workflow to run.
        data: Its input (JSON).
        key: An idempotency key, as in `App.submit`.
        reply_to: A tag for the task's events, as in `App.submit`.
        delay: Seconds before it may start, as in `App.submit`.
        not_before: The instant before which it may not start, as in `App.submit`.
        deadline: Seconds it has to end once due, as in `App.submit`.
    """

    workflow: str
    data: JsonValue = None
    _: KW_ONLY
    key: str | None = None
    reply_to: str | None = None
    delay: float | None = None
    not_before: datetime | None = None
    deadline: float | None = None


class Timing(TypedDict, total=False):
    """When a submitted task may start and by when it must end (`App.submit(..., **timing)`).

    Attributes:
        delay: Seconds from the submit, on the store's clock, before it may start
            (>= 0, finite, at most 100 years).
        not_before: Or the instant before which it may not start: an aware
            datetime (one already past: at once). Not with `delay`.
        deadline: Seconds it has to end once due (> 0, finite, at most 100
            years), else the supervisor cancels it with the reason `deadline
            passed`; default: the workflow's `deadline`.
    """

    delay: float | None
    not_before: datetime | None
    deadline: float | None


_TIMING_KEYS = frozenset(Timing.__annotations__)


def new_task(
    workflows: Mapping[str, Workflow],
    workflow: str,
    data: JsonValue,
    *,
    key: str | None,
    reply_to: str | None,
    **timing: Unpack[Timing],
) -> NewTask:
    """The task one submit inserts, its arguments checked.

    Without a `deadline`, the workflow's own (`@app.workflow(deadline=...)`) applies.

    Raises:
        UnknownWorkflowError: No workflow of that name is registered.
        PayloadError: `key` or `reply_to` is not a str a store can keep.
        ConfigError: `delay`, `not_before` or `deadline` is refused (`core.timing`),
            or `delay` and `not_before` are both given; the field is named.
    """
    if timing.keys() - _TIMING_KEYS:  # as Python says it of any other keyword
        unknown = sorted(timing.keys() - _TIMING_KEYS)
        raise TypeError(f"submit() got an unexpected keyword argument {unknown[0]!r}")
    spec = workflows.get(workflow)
    if spec is None:
        raise UnknownWorkflowError(workflow, list(workflows))
    check_text("key", key)
    check_text("reply_to", reply_to)
    delay = timing.get("delay")
    not_before = timing.get("not_before")
    deadline = timing.get("deadline")
    if deadline is None:
        deadline = spec.deadline
    # No timing at all (the common submit): nothing to check.
    checked = (
        {}
        if delay is None and not_before is None and deadline is None
        else _timing(delay, not_before, deadline)
    )
    return NewTask(
        workflow=workflow,
        input=data,
        key=key,
        reply_to=reply_to,
        complete_within=spec.complete_within,
        **checked,
    )


def _timing(
    delay: float | None, not_before: datetime | None, deadline: float | None
) -> dict[str, Any]:
    """The checked `delay`, `not_before` and `deadline` of a `NewTask`.

    Raises:
        ConfigError: One is refused (`core.timing`), or both `delay` and
            `not_before` are given; the field is named.
    """
    if delay is not None and not_before is not None:
        raise ConfigError(
            "delay", "give delay (seconds from now) or not_before (an instant), not both"
        )
    out: dict[str, Any] = {}
    for field, value, check in (
        ("delay", delay, checked_delay),
        ("not_before", not_before, checked_not_before),
        ("deadline", deadline, checked_deadline),
    ):
        if value is None:
            continue
        try:
            out[field] = check(value)
        except ValueError as exc:
            raise ConfigError(field, str(exc)) from None
    return out


def new_tasks(
    workflows: Mapping[str, Workflow], submissions: Iterable[Submission]
) -> list[NewTask]:
    """The tasks `submit_many` inserts, every submission checked first.

    Raises:
        PayloadError: An item is not a `Submission`, or its `key` or `reply_to`
            is not a str a store can keep; the message starts `submissions[i]:`.
        ConfigError: An item's `delay`, `not_before` or `deadline` is refused (same prefix).
        UnknownWorkflowError: An item names no registered workflow (same prefix).
    """
    tasks = []
    for index, item in enumerate(submissions):
        if not isinstance(item, Submission):
            raise PayloadError(
                f"submissions[{index}]: must be a Submission, not {type(item).__name__}"
            )
        try:
            tasks.append(
                new_task(
                    workflows,
                    item.workflow,
                    item.data,
                    key=item.key,
                    reply_to=item.reply_to,
                    delay=item.delay,
                    not_before=item.not_before,
                    deadline=item.deadline,
                )
            )
        except (UnknownWorkflowError, PayloadError, ConfigError) as exc:
            raise at_index(index, exc) from None
    return tasks


def commit_unknown(lost: CommitUnknownError, tasks: Sequence[NewTask]) -> CommitUnknownError:
    """The error for submits whose commit was cut off: what exists is unknown; is a retry safe?"""
    if len(tasks) == 1:
        (task,) = tasks
        what = f"the submit of a {task.workflow!r} task"
        subject = "it may or may not exist"
        retry = (
            f"submitting again with the same key ({task.key!r}) is safe: it returns the task "
            "if it exists, or creates it"
            if task.key is not None
            else "without a key, submitting again may create a second task; pass key= "
            "to make submits safe to retry"
        )
    else:
        what = f"the submit of {len(tasks)} tasks (one transaction)"
        subject = "they may or may not exist, all of them or none"
        keyless = [i for i, task in enumerate(tasks) if task.key is None]
        retry = (
            "submitting them again is safe: every one has a key, so each returns its task "
            "if it exists, or creates it"
            if not keyless
            else f"{len(keyless)} have no key (the first is submissions[{keyless[0]}]): "
            "submitting them again may create second tasks; pass key= to make submits safe "
            "to retry"
        )
    return CommitUnknownError(
        f"the store was lost while {what} was committing: {subject}; {retry} ({lost.message})"
    )


async def submit_one(store: Store, task: NewTask, connection: object | None) -> str:
    """Write one task (in the caller's transaction, with `connection`); its id.

    Raises:
        CommitUnknownError: The commit was cut off; the message says whether a
            retry is safe (`commit_unknown`).
    """
    if tracing.ENABLED and tracing.active():
        with tracing.submit_span([task.workflow]) as traced:
            task_id = await _submit_one(store, replace(task, trace=traced.context), connection)
            traced.submitted([task_id])
            return task_id
    return await _submit_one(store, task, connection)


async def _submit_one(store: Store, task: NewTask, connection: object | None) -> str:
    try:
        if connection is not None:
            submitted = await store.submit_task_in(task, connection)
        else:
            submitted = await store.submit_task(task)
    except CommitUnknownError as exc:
        raise commit_unknown(exc, [task]) from None
    return submitted.task_id


async def submit_all(store: Store, tasks: list[NewTask], connection: object | None) -> list[str]:
    """Write `tasks` in one transaction (the caller's, with `connection`); their ids, in order.

    Raises:
        CommitUnknownError: The commit was cut off: all the tasks or none exist;
            the message says whether a retry is safe (`commit_unknown`).
    """
    if tracing.ENABLED and tasks and tracing.active():
        with tracing.submit_span([task.workflow for task in tasks]) as traced:
            tasks = [replace(task, trace=traced.context) for task in tasks]
            task_ids = await _submit_all(store, tasks, connection)
            traced.submitted(task_ids)
            return task_ids
    return await _submit_all(store, tasks, connection)


async def _submit_all(store: Store, tasks: list[NewTask], connection: object | None) -> list[str]:
    try:
        if connection is not None:
            submitted = await store.submit_tasks_in(tasks, connection)
        else:
            submitted = await store.submit_tasks(tasks)
    except CommitUnknownError as exc:
        raise commit_unknown(exc, tasks) from None
    return [s.task_id for s in submitted]
