"""The operator's actions, each a POST checked for its CSRF token, each through `Operations`.

Retry (from the failed step, or from step `seq` with a new JSON payload),
cancel, and acknowledge an alert; `by` is always the operator who asks. A
refused action (bad JSON, a state the action does not apply to) changes
nothing and shows the task page again with the reason, the typed payload kept.
Success redirects back to the page (303), where the live view takes over.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.responses import RedirectResponse, Response

from shepherd.core.signalling import MAX_NAME_BYTES
from shepherd.dashboard import params
from shepherd.dashboard.access import local_path, posted_form
from shepherd.dashboard.pages import render
from shepherd.dashboard.task_page import refused_page, task_context
from shepherd.errors import (
    InvalidStateError,
    ShepherdError,
    UnknownTaskError,
)
from shepherd.operations import MAX_SEQ
from shepherd.payloads import MAX_PAYLOAD_BYTES, loads

if TYPE_CHECKING:
    from starlette.requests import Request

    from shepherd.core.records import JsonValue
    from shepherd.operations import Operations

__all__ = ["acknowledge", "cancel", "retry", "signal", "wake"]


async def retry(request: Request) -> Response:
    """POST /tasks/{id}/retry: fields `seq` (optional) and `payload` (optional JSON, needs `seq`)."""
    form = await posted_form(request)
    ops: Operations = request.app.state.guard.operations
    task_id = params.task_id(request)
    payload_text = params.text(request, form, "payload", limit=MAX_PAYLOAD_BYTES, strip=False)
    payload_text = payload_text if payload_text is not None and payload_text.strip() else ""
    seq_shown = ""
    try:
        seq_shown = params.text(request, form, "seq", limit=60) or ""
        seq = params.whole(request, form, "seq", low=1, high=MAX_SEQ)
        payload: JsonValue = None
        if payload_text:
            if seq is None:
                raise ShepherdError("a new payload needs the step it replaces: choose a step")
            payload = loads(payload_text)
        await ops.retry(task_id, seq=seq, payload=payload, by=request.state.who.operator)
    except ShepherdError as exc:
        return await _refused(request, task_id, exc, payload_text=payload_text, seq=seq_shown)
    return RedirectResponse(f"/tasks/{task_id}", status_code=303)


async def cancel(request: Request) -> Response:
    """POST /tasks/{id}/cancel: compensate the task, then it ends `cancelled`."""
    await posted_form(request)
    ops: Operations = request.app.state.guard.operations
    task_id = params.task_id(request)
    try:
        await ops.cancel(task_id, by=request.state.who.operator)
    except ShepherdError as exc:
        return await _refused(request, task_id, exc)
    return RedirectResponse(f"/tasks/{task_id}", status_code=303)


async def wake(request: Request) -> Response:
    """POST /tasks/{id}/wake: a sleeping task (`ctx.sleep`) goes on now."""
    await posted_form(request)
    ops: Operations = request.app.state.guard.operations
    task_id = params.task_id(request)
    try:
        await ops.wake(task_id, by=request.state.who.operator)
    except ShepherdError as exc:
        return await _refused(request, task_id, exc)
    return RedirectResponse(f"/tasks/{task_id}", status_code=303)


async def signal(request: Request) -> Response:
    """POST /tasks/{id}/signal: `signal_name`, `signal_payload` (JSON; empty: null) (`app.signal`).

    Named apart from the retry form's `payload`, which the same page shows.
    """
    form = await posted_form(request)
    ops: Operations = request.app.state.guard.operations
    task_id = params.task_id(request)
    payload_text = params.text(
        request, form, "signal_payload", limit=MAX_PAYLOAD_BYTES, strip=False
    )
    payload_text = payload_text if payload_text is not None and payload_text.strip() else ""
    try:
        name = params.text(request, form, "signal_name", limit=MAX_NAME_BYTES) or ""
        payload = loads(payload_text) if payload_text else None
        await ops.signals.send(task_id, name, payload, by=request.state.who.operator)
    except ShepherdError as exc:
        return await _refused(request, task_id, exc, signal_text=payload_text)
    return RedirectResponse(f"/tasks/{task_id}", status_code=303)


async def acknowledge(request: Request) -> Response:
    """POST /alerts/{id}/acknowledge: field `next`, the local page to go back to."""
    form = await posted_form(request)
    ops: Operations = request.app.state.guard.operations
    back = local_path(params.text(request, form, "next", limit=2000) or "/")
    try:
        await ops.acknowledge_alert(request.path_params["alert_id"], by=request.state.who.operator)
    except ShepherdError as exc:
        return render(request, "missing.html", status=404, problem=exc.message)
    return RedirectResponse(back, status_code=303)


async def _refused(
    request: Request,
    task_id: str,
    error: ShepherdError,
    *,
    payload_text: str = "",
    seq: str = "",
    signal_text: str = "",
) -> Response:
    """The task page again, with why the action was refused (nothing was changed)."""
    ops: Operations = request.app.state.guard.operations
    if isinstance(error, UnknownTaskError):
        return render(request, "missing.html", status=404, problem=error.message)
    status = 409 if isinstance(error, InvalidStateError) else 400
    context = await task_context(ops, task_id)
    return refused_page(
        request,
        context,
        status=status,
        problem=error.message,
        payload_text=payload_text,
        chosen_seq=seq,
        signal_text=signal_text,
    )
