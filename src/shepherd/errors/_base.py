"""The errors of shepherd but resource governance's (re-exported by `shepherd.errors`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from datetime import datetime


class ShepherdError(Exception):
    """A shepherd error."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (type(self).__doc__ or type(self).__name__).strip())

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""


class ConfigError(ShepherdError):
    """Invalid configuration."""

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        super().__init__(f"invalid setting {field!r}: {problem}")


class IncompleteAppError(ConfigError):
    """A workflow calls agents that are not registered on the app (checked at start)."""

    def __init__(self, problems: str) -> None:
        self.field = "app"
        ShepherdError.__init__(self, f"incomplete app: {problems}")


class StoreUnavailableError(ShepherdError):
    """The state store cannot be reached now.

    A passing condition (a server restart, a network cut, a busy or full disk):
    the roles log it once, back off and try again; a caller may retry.
    """


class StoreFullError(StoreUnavailableError):
    """The store's disk is full: nothing can be written until space is freed."""


class CommitUnknownError(StoreUnavailableError):
    """The store was lost while a write was committing: it may or may not have happened.

    Every store write is safe to retry (conditional updates, idempotent inserts);
    a submit is safe to retry with the same `key`.
    """


class StoreDamagedError(ShepherdError):
    """The store is damaged (a corrupt file, a foreign schema): it cannot be used.

    Not a passing condition: a worker stops with this message instead of retrying.
    """


class UnusableStoreError(ShepherdError):
    """The store cannot be used without changing it; nothing was read or written.

    Raised by a store opened without migrations (`open_store(..., migrate=False)`,
    `App.migrate = False`: the operator's commands, the dashboard): it never
    creates a store, nor adds tables to a file or a database, nor migrates one.
    `where` names the file or database.
    """

    def __init__(self, message: str, *, where: str) -> None:
        self.where = where
        super().__init__(message)


class StoreNotFoundError(UnusableStoreError):
    """No shepherd store there yet: the SQLite file does not exist, or the database is empty."""


class NotAStoreError(UnusableStoreError):
    """The file or database holds something else than a shepherd store (another application's)."""


class StoreTooNewError(UnusableStoreError):
    """The store's schema was migrated by newer shepherd code than this one: upgrade shepherd."""


class StoreTooOldError(UnusableStoreError):
    """The store's schema predates this code: a process that migrates must open it first."""


class RoleStoppedError(ShepherdError):
    """A role's loop ended on its own; the process stops so that it can be restarted."""


class UnknownWorkflowError(ShepherdError):
    """No workflow of that name is registered."""

    def __init__(self, name: str, known: list[str] | None = None) -> None:
        self.name = name
        hint = f" (known: {', '.join(sorted(known))})" if known else ""
        super().__init__(f"unknown workflow {name!r}{hint}")


class UnknownAgentError(ShepherdError):
    """No agent of that name is registered."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"unknown agent {name!r}")


class UnknownTaskError(ShepherdError):
    """No task with that id.

    When the task existed and was deleted by retention, `process_state` is the
    state it ended in and `purged_at` when it was deleted; both are None otherwise.
    """

    def __init__(
        self,
        task_id: str,
        *,
        process_state: str | None = None,
        purged_at: datetime | None = None,
    ) -> None:
        self.task_id = task_id
        self.process_state = process_state
        self.purged_at = purged_at
        message = f"unknown task {task_id!r}"
        if process_state is not None and purged_at is not None:
            when = purged_at.isoformat(timespec="seconds")
            message += f": it ended {process_state} and was purged at {when} (retention)"
        super().__init__(message)


class UnknownAlertError(ShepherdError):
    """No stored operator alert with that id."""

    def __init__(self, alert_id: int) -> None:
        self.alert_id = alert_id
        super().__init__(f"unknown alert {alert_id} (list them with shepherd alerts)")


class UnknownOperatorError(ShepherdError):
    """No operator (named token) of that name."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"no operator is named {name!r} (list them with shepherd tokens list)")


class OperatorExistsError(ShepherdError):
    """An operator of that name exists already."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(
            f"an operator named {name!r} exists already: remove it first to give it a new token"
        )


class PayloadError(ShepherdError):
    """The payload is not acceptable JSON."""


class OwnerKeyError(PayloadError):
    """A call to an exclusive agent whose owning key cannot be found from its payload
    (or is longer than the store keeps: `shepherd.core.limits.KEY_BYTES`)."""

    def __init__(self, agent: str, problem: str) -> None:
        self.agent = agent
        self.problem = problem
        super().__init__(f"call to exclusive agent {agent!r}: {problem}; nothing was sent")


class TooLongError(ConfigError, PayloadError):
    """A caller-given text over its limit in bytes of UTF-8 (`shepherd.core.limits`); nothing written.

    A PayloadError wherever the text came (a key, a `by`, a name), and a
    ConfigError too, with the `field` it names, since names are also given when
    an app is declared: the same value is refused with the same error on both
    backends, before the store is touched.
    """

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        ShepherdError.__init__(self, problem)


class InvalidStateError(ShepherdError):
    """The operation does not apply to the task in its current state."""

    def __init__(self, task_id: str, state: str, operation: str) -> None:
        self.task_id = task_id
        self.state = state
        super().__init__(f"cannot {operation} task {task_id}: it is {state}")


class NonDeterminismError(ShepherdError):
    """The workflow called a different agent than the one recorded at this step."""

    def __init__(self, task_id: str, seq: int, recorded: str, called: str) -> None:
        self.task_id = task_id
        self.seq = seq
        self.recorded = recorded
        self.called = called
        super().__init__(
            f"non-deterministic workflow: step {seq} of task {task_id} was recorded as "
            f"{recorded!r} but the workflow now calls {called!r}"
        )


class StaleEpochError(ShepherdError):
    """The write was refused: the task's lock_epoch has moved on (fencing)."""

    def __init__(self, task_id: str, epoch: int) -> None:
        self.task_id = task_id
        self.epoch = epoch
        super().__init__(f"task {task_id}: lock_epoch {epoch} is stale; the write was refused")


class TaskFailedError(ShepherdError):
    """The task ended without a result."""

    def __init__(self, task_id: str, state: str, error: Any) -> None:
        self.task_id = task_id
        self.state = state
        self.error = error
        super().__init__(f"task {task_id} ended {state}: {error}")


class SignalTimeoutError(ShepherdError):
    """`ctx.wait_for` reached its timeout before a signal of its name arrived.

    Raised in the workflow, which may catch it (a replay raises it again at
    the same step, never consuming a signal that arrived later: that one stays
    for the next wait of its name).
    """

    def __init__(self, task_id: str, name: str, seq: int, timeout_at: datetime | None) -> None:
        self.task_id = task_id
        self.name = name
        self.seq = seq
        self.timeout_at = timeout_at
        when = "" if timeout_at is None else f" at {timeout_at.isoformat()}"
        super().__init__(f"task {task_id}: no signal {name!r} came before the wait's timeout{when}")


class AgentError(ShepherdError):
    """An agent handler failed."""


class CallFailedError(AgentError):
    """A call (`app.call`) was answered with an error: the handler's permanent error,
    its repeated bug, or the call given up after its handlings kept failing to answer.

    Attributes:
        agent: The agent called.
        call_id: The call's id.
        error: The stored error body (`type`, `message`, ...).
    """

    def __init__(self, agent: str, call_id: str, error: Any) -> None:
        self.agent = agent
        self.call_id = call_id
        self.error = error
        what = error.get("message") if isinstance(error, dict) else error
        kind = error.get("type") if isinstance(error, dict) else None
        super().__init__(f"call {call_id} to {agent!r} failed: {kind + ': ' if kind else ''}{what}")


class BreakerOpenError(AgentError):
    """`app.call` refused at once, its handler not run: its service's breaker is open."""

    def __init__(self, agent: str, service: str) -> None:
        self.agent = agent
        self.service = service
        super().__init__(f"agent {agent!r}: the circuit breaker of service {service!r} is open")


class TransientError(AgentError):
    """A transient failure: the agent retries within complete_by."""


class _StepFailure(AgentError):
    """A step that failed, as `ctx.call` raises it: which agent, which seq, its stored error."""

    def __init__(
        self,
        message: str | None = None,
        *,
        agent: str | None = None,
        seq: int | None = None,
        detail: Any = None,
    ) -> None:
        self.agent = agent
        self.seq = seq
        self.detail = detail
        super().__init__(message)


class PermanentError(_StepFailure):
    """A permanent failure: the step fails and the workflow sees this error."""


class StepBugError(_StepFailure):
    """A step's handler raised an unexpected exception (a bug), again and again.

    Raised by `ctx.call` when the agent replied its failure as a bug: an
    exception that is neither a TransientError nor a PermanentError (nor a
    known transient one), retried like a transient one until the tries or the
    step's window ran out. Not a PermanentError: a bug is not the remote
    service's refusal, so `except PermanentError` does not catch it. Left
    unhandled it sends the task to `error` with an operator alert (not to
    compensation: nothing was refused, so nothing should be undone before
    someone looks).

    Attributes:
        agent: The agent whose handler failed.
        seq: The step's seq.
        error_type: The name of the handler's exception class (`KeyError`).
        tries: How many tries raised it, in the last attempt.
        traceback: The handler's formatted traceback (its innermost frames).
        detail: The step's stored error, as the agent replied it.
    """

    def __init__(
        self,
        message: str | None = None,
        *,
        agent: str | None = None,
        seq: int | None = None,
        detail: Any = None,
    ) -> None:
        body = detail if isinstance(detail, dict) else {}
        self.error_type = str(body.get("type") or "Exception")
        tries = body.get("tries")
        self.tries = tries if isinstance(tries, int) and not isinstance(tries, bool) else None
        self.traceback = str(body.get("traceback") or "")
        if message is None:
            told = body.get("message")
            what = f"{self.error_type}: {told}" if told else self.error_type
            count = "" if self.tries is None else f", {self.tries} tries"
            message = f"step {seq} ({agent}) raised {what} (a bug in agent {agent!r}{count})"
        super().__init__(message, agent=agent, seq=seq, detail=detail)


class StepSupersededError(ShepherdError):
    """This execution of a step is no longer current: it was given up and sent again,
    or the task moved on. The handler should stop: nothing it replies would count,
    and the agent worker sends no reply when a handler raises it.
    """

    def __init__(self, task_id: str, seq: int, attempt: int) -> None:
        self.task_id = task_id
        self.seq = seq
        self.attempt = attempt
        super().__init__(
            f"step {seq} of task {task_id} (attempt {attempt}) is no longer this "
            "execution's: it was given up and sent again, or the task moved on"
        )


class OutcomeUnknownError(PermanentError):
    """A side effect may or may not have happened: an earlier execution started it
    and never recorded its outcome.

    Raised by `request.once()`; in the workflow, `ctx.call` raises it for that step.
    Left unhandled it sends the task to `error` with an operator alert (not to
    compensation: undoing the other steps would hide an effect nobody checked).
    """
