"""How a handler's exception is classified, and the error a failed step carries."""

from __future__ import annotations

import httpx
import pytest

from shepherd import OutcomeUnknownError, PermanentError, StepBugError, StoreUnavailableError
from shepherd.agents.http import HTTPPermanentError, HTTPTransientError
from shepherd.errors import AgentError, TransientError
from shepherd.failures import (
    MESSAGE_LIMIT,
    TRACEBACK_LIMIT,
    bug_body,
    classify,
    error_body,
    format_traceback,
    is_bug,
)


def _status_error(status: int) -> httpx.HTTPStatusError:
    request = httpx.Request("GET", "http://service/x")
    response = httpx.Response(status, request=request)
    return httpx.HTTPStatusError(f"HTTP {status}", request=request, response=response)


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (TransientError("busy"), "transient"),
        (HTTPTransientError("503", status=503), "transient"),
        (TimeoutError(), "transient"),
        (ConnectionResetError(), "transient"),
        (StoreUnavailableError(), "transient"),
        (httpx.ConnectError("refused"), "transient"),
        (_status_error(503), "transient"),
        (_status_error(429), "transient"),
        (PermanentError("card declined"), "permanent"),
        (HTTPPermanentError("422", status=422), "permanent"),
        (OutcomeUnknownError("may have happened"), "permanent"),
        (_status_error(404), "permanent"),
        (_status_error(500), "permanent"),
        (KeyError("missing"), "bug"),
        (TypeError("unsupported operand"), "bug"),
        (ValueError("bad literal"), "bug"),
        (RuntimeError("not initialised"), "bug"),
        (FileNotFoundError("config.toml"), "bug"),
        (AgentError("neither"), "bug"),
    ],
    ids=lambda v: v if isinstance(v, str) else type(v).__name__,
)
def test_classify(exc: BaseException, kind: str) -> None:
    assert classify(exc) == kind


def _raise_deep(depth: int) -> None:
    if depth == 0:
        raise KeyError("missing")
    _raise_deep(depth - 1)


def _caught(depth: int) -> BaseException:
    try:
        _raise_deep(depth)
    except KeyError as exc:
        return exc
    raise AssertionError("nothing raised")


def test_a_bug_body_carries_the_innermost_frames_and_the_tries() -> None:
    exc = _caught(20)
    body = bug_body(exc, tries=3)

    assert {k: body[k] for k in ("type", "message", "bug", "tries")} == {
        "type": "KeyError",
        "message": "'missing'",
        "bug": True,
        "tries": 3,
    }
    text = body["traceback"]
    assert text.startswith("Traceback (most recent call last):")
    assert text.rstrip().endswith("KeyError: 'missing'")
    assert "raise KeyError" in text
    assert "in _caught" not in text, "the innermost 8 frames only"
    assert is_bug(body)
    assert not is_bug(error_body(exc))
    assert not is_bug("KeyError")


def test_a_long_traceback_keeps_its_end() -> None:
    exc = ValueError("x" * (TRACEBACK_LIMIT * 2))
    text = format_traceback(exc)
    assert len(text) <= TRACEBACK_LIMIT + len("...\n")
    assert text.startswith("...\n")
    assert text.endswith("x\n")


def test_a_long_message_keeps_its_beginning() -> None:
    message = error_body(ValueError("y" * (MESSAGE_LIMIT * 3)))["message"]
    assert message == "y" * MESSAGE_LIMIT + "..."


def test_an_error_body_keeps_the_detail_of_a_permanent_error() -> None:
    body = error_body(PermanentError("card declined", detail={"code": 51}))
    assert body == {"type": "PermanentError", "message": "card declined", "detail": {"code": 51}}


def test_a_step_bug_error_names_the_exception_and_is_not_a_permanent_error() -> None:
    detail = bug_body(_caught(0), tries=3)
    exc = StepBugError(agent="a.one", seq=1, detail=detail)

    assert str(exc) == "step 1 (a.one) raised KeyError: 'missing' (a bug in agent 'a.one', 3 tries)"
    assert (exc.error_type, exc.tries, exc.traceback) == ("KeyError", 3, detail["traceback"])
    assert isinstance(exc, AgentError)
    assert not isinstance(exc, PermanentError)


def test_a_step_bug_error_of_a_sparse_body_still_says_what_it_can() -> None:
    exc = StepBugError(agent="a", seq=2, detail={"bug": True})
    assert str(exc) == "step 2 (a) raised Exception (a bug in agent 'a')"
    assert (exc.tries, exc.traceback) == (None, "")
