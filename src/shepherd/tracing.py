"""OpenTelemetry spans for tasks and steps, and the trace context that travels with them.

On when `opentelemetry-api` can be imported (`pip install 'shepherd[otel]'`):
`ENABLED` is then True. Every caller checks `ENABLED` before it calls anything
else here, so without OpenTelemetry a submit, a task and a step cost one
branch each. The spans go to the TracerProvider the application set
(`opentelemetry.trace.set_tracer_provider`, the standard way). Until one is
set, `active()` is False: the callers make no span, and no context is stored
(a scheduler then sends its task's own context on with each request).

The spans, and how they chain across processes through the store:

* `shepherd.submit`, around `App.submit` / `submit_many`, a child of the
  caller's current span. Its context is stored with the task (`tasks.trace`).
* `shepherd.task <workflow>`, one per run of a task in a scheduler (a claim,
  or a run again after a store outage), a child of the submitter's context.
  Its context is stored on each request the run sends (`requests.trace`).
* `shepherd.step <agent>`, one per request an agent worker handles, a child
  of its request's context; the handler runs inside it, so the spans of the
  libraries it calls are its children. Its context is stored on the reply
  (`replies.trace`).
* `shepherd.reply`, when a scheduler records a reply that came with a
  context: an instant span, a child of the step span that answered.

A stored context is the propagator's fields (W3C `traceparent` and
`tracestate` with the default propagator) as a JSON object; a request's also
names its workflow (`shepherd.workflow`), so that the step span can say it.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Final, final

from shepherd.core.states import ProcessState

if TYPE_CHECKING:
    from shepherd.core.records import Reply, Request, Task

try:
    from opentelemetry import propagate, trace
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, SpanKind, Status, StatusCode
except ImportError:  # pragma: no cover - exercised in a process without shepherd[otel]
    ENABLED = False
else:
    ENABLED = True
    #: shepherd's tracer: a proxy until the application sets its provider, then its own.
    _TRACER = trace.get_tracer("shepherd")
    _PROXY = trace.ProxyTracer
    _PROXY_PROVIDER = trace.ProxyTracerProvider

__all__ = [
    "ENABLED",
    "TaskTrace",
    "active",
    "current",
    "failed",
    "replied",
    "step_span",
    "submit_span",
    "task_span",
    "tried",
]

#: The key of a request's context that names its task's workflow.
WORKFLOW: Final = "shepherd.workflow"
#: Longest stored context read back: anything longer is not one of ours.
MAX_CONTEXT = 8192
#: The ends of a task that its span marks as errors.
_FAILED = frozenset({ProcessState.ERROR, ProcessState.COMPENSATED})
#: Whether the application has set a tracer provider (it can be set only once).
_provider_set = False
#: When `active` last asked OpenTelemetry (monotonic seconds), and how often it asks.
_asked_at = -math.inf
RECHECK = 1.0


def active() -> bool:
    """Whether spans can be recorded: the application set a tracer provider.

    Until it does, the API's default records nothing; a span would cost
    several microseconds for nothing, so the callers make none. Asking
    OpenTelemetry costs about a microsecond, so until a provider is set the
    answer is asked again at most every RECHECK seconds: set the provider
    before the App runs (at import, as docs/howto/tracing.md shows). Once set,
    a provider stays (OpenTelemetry allows one per process).
    """
    global _provider_set, _asked_at
    if _provider_set or not isinstance(_TRACER, _PROXY):
        return True
    now = time.monotonic()
    if now - _asked_at < RECHECK:
        return False
    _asked_at = now
    _provider_set = not isinstance(trace.get_tracer_provider(), _PROXY_PROVIDER)
    return _provider_set


def current(**extra: str) -> str | None:
    """The current span's context as stored text, or None when there is none to pass on.

    With the API's default provider (nothing recorded) the current span is
    invalid and nothing is stored.
    """
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    if not carrier:
        return None
    carrier.update(extra)
    return json.dumps(carrier, separators=(",", ":"), sort_keys=True)


def _carrier(text: str | None) -> dict[str, str]:
    """A stored context's fields; {} for None or for text that is not one."""
    if text is None or len(text) > MAX_CONTEXT:
        return {}
    try:
        loaded = json.loads(text)
    except ValueError:
        return {}
    if not isinstance(loaded, dict):
        return {}
    return {k: v for k, v in loaded.items() if isinstance(k, str) and isinstance(v, str)}


def _parent(carrier: Mapping[str, str]) -> Context:
    """The context a stored one continues: only what it holds, never this process's own."""
    return propagate.extract(carrier, context=Context())


@final
class Submit:
    """The `shepherd.submit` span of one submit: the context to store, then the ids."""

    __slots__ = ("context", "span")

    def __init__(self, span: Span) -> None:
        self.span = span
        #: What is stored with the tasks (`NewTask.trace`).
        self.context = current()

    def submitted(self, task_ids: Sequence[str]) -> None:
        """Name the tasks the submit made or found (`shepherd.task_id` for one)."""
        if len(task_ids) == 1:
            self.span.set_attribute("shepherd.task_id", task_ids[0])
        else:
            self.span.set_attribute("shepherd.task_ids", list(task_ids))


@contextmanager
def submit_span(workflows: Sequence[str]) -> Iterator[Submit]:
    """A `shepherd.submit` span, current while the tasks of `workflows` are submitted.

    A child of the caller's current span; an exception is recorded on it.
    """
    names = sorted(set(workflows))
    attributes: dict[str, str | int] = {"shepherd.tasks": len(workflows)}
    if len(names) == 1:
        attributes["shepherd.workflow"] = names[0]
    with _TRACER.start_as_current_span(
        "shepherd.submit", kind=SpanKind.PRODUCER, attributes=attributes
    ) as span:
        yield Submit(span)


@final
class TaskTrace:
    """The `shepherd.task` span of one run of a task, and the context its requests carry."""

    __slots__ = ("context", "span")

    def __init__(self, span: Span, workflow: str) -> None:
        self.span = span
        #: What each request of this run carries (`StepStart.trace`).
        self.context = current(**{WORKFLOW: workflow})

    def ended(self, state: ProcessState, reason: str | None = None) -> None:
        """The task ended in `state` in this run: `error` and `compensated` are errors."""
        self.span.set_attribute("shepherd.process_state", str(state))
        if state in _FAILED:
            self.span.set_status(Status(StatusCode.ERROR, reason or str(state)))


@contextmanager
def task_span(task: Task) -> Iterator[TaskTrace]:
    """A `shepherd.task <workflow>` span, current while a scheduler runs `task`."""
    with _TRACER.start_as_current_span(
        f"shepherd.task {task.workflow}",
        context=_parent(_carrier(task.trace)),
        kind=SpanKind.CONSUMER,
        attributes={
            "shepherd.task_id": task.id,
            "shepherd.workflow": task.workflow,
            "shepherd.lock_epoch": task.lock_epoch,
            "shepherd.failure_count": task.failure_count,
            "shepherd.process_state": str(task.process_state),
        },
    ) as span:
        yield TaskTrace(span, task.workflow)


@contextmanager
def step_span(request: Request) -> Iterator[None]:
    """A `shepherd.step <agent>` span, current while an agent worker handles `request`."""
    carrier = _carrier(request.trace)
    attributes: dict[str, str | int] = {
        "shepherd.task_id": request.task_id,
        "shepherd.seq": request.seq,
        "shepherd.agent": request.agent,
        "shepherd.attempt": request.attempt,
        "shepherd.step_kind": str(request.kind),
    }
    workflow = carrier.pop(WORKFLOW, None)
    if workflow is not None:
        attributes["shepherd.workflow"] = workflow
    with _TRACER.start_as_current_span(
        f"shepherd.step {request.agent}",
        context=_parent(carrier),
        kind=SpanKind.CONSUMER,
        attributes=attributes,
    ):
        yield


def tried(exc: BaseException) -> None:
    """A try of the current step's handler failed: the exception is an event of its span."""
    trace.get_current_span().record_exception(exc)


def failed(reason: str) -> None:
    """The current step failed (an error reply, given up, timed out): its span says why."""
    trace.get_current_span().set_status(Status(StatusCode.ERROR, reason))


def replied(reply: Reply) -> None:
    """A scheduler recorded `reply`: an instant span, a child of the step span that answered."""
    span = _TRACER.start_span(
        "shepherd.reply",
        context=_parent(_carrier(reply.trace)),
        attributes={
            "shepherd.task_id": reply.task_id,
            "shepherd.seq": reply.seq,
            "shepherd.attempt": reply.attempt,
            "shepherd.ok": reply.ok,
        },
    )
    span.end()
