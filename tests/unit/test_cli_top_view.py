"""`shepherd top`'s frame drawn with Rich, and its rate between frames (pure: no store)."""

from __future__ import annotations

from datetime import timedelta

from rich.console import Console

from shepherd.cli.top_view import Frame, Rates, render
from shepherd.core.breaker import Breaker, BreakerState
from shepherd.core.records import Lease
from shepherd.core.states import ProcessState
from support.records import NOW, task_record


def frame(**changes: object) -> Frame:
    """A frame: 3 processed, 2 compensated and 1 error task, no failure, breaker or leader."""
    fields: dict[str, object] = {
        "at": NOW,
        "counts": dict.fromkeys(ProcessState, 0)
        | {ProcessState.PROCESSED: 3, ProcessState.COMPENSATED: 2, ProcessState.ERROR: 1},
        "minute": (3, 2, 1, 0),
        "minute_span": 57.0,
        "failures": [],
        "open_alerts": frozenset(),
        "breakers": [],
        "workers_alive": 2,
        "leader": None,
    }
    fields.update(changes)
    return Frame(**fields)  # type: ignore[arg-type]


def text(shown: Frame, *, rate: float | None = None, interval: float | None = None) -> str:
    console = Console(width=140, record=True, color_system=None)
    console.print(render(shown, rate=rate, interval=interval))
    return "\n".join(" ".join(line.split()) for line in console.export_text().splitlines())


def test_a_frame_shows_every_state_the_minute_and_the_header() -> None:
    shown = text(frame())

    assert "shepherd top 2025-01-31 12:00:00Z workers alive: 2" in shown
    assert "supervisor leader: none" in shown
    for state in ProcessState:
        count = {"processed": 3, "compensated": 2, "error": 1}.get(str(state), 0)
        assert f"\n{state} {count}\n" in shown
    # 6 tasks over 57 s; a compensated task (undone) is not one in error.
    assert "over per second processed compensated error cancelled" in shown
    assert "last minute 0.11 3 2 1 0" in shown
    assert "last " not in shown.replace("last minute", "")  # --once: no rate between frames
    assert "recent failures: none in error" in shown
    assert "breakers: none yet" in shown


def test_failures_breakers_leader_and_the_rate_between_frames() -> None:
    failed = task_record(
        id="01a219a2bb1cb28e4dc0",
        workflow="orders.pay",
        process_state=ProcessState.ERROR,
        error={"reason": "step 1 (payments.charge) failed permanently: declined"},
        updated_at=NOW - timedelta(minutes=3),
    )
    quiet = task_record(id="01a219a2bb1cb28e4dc1", process_state=ProcessState.ERROR)
    opened = Breaker(
        service="payments", state=BreakerState.OPEN, consecutive_failures=5, opened_at=NOW
    )
    shown = text(
        frame(
            failures=[failed, quiet],
            open_alerts=frozenset({failed.id}),
            breakers=[opened, Breaker(service="mail")],
            leader=Lease(name="supervisor", holder="host:1:ab/v", epoch=7, expires_at=NOW),
        ),
        rate=1.5,
        interval=2.0,
    )

    assert "supervisor leader: host:1:ab/v (epoch 7)" in shown
    assert "last 2s 1.50" in shown
    assert (
        "01a219a2bb1cb28e4dc0 orders.pay open 3m ago "
        "step 1 (payments.charge) failed permanently: declined"
    ) in shown
    assert "01a219a2bb1cb28e4dc1 orders.place 0s ago" in shown  # its alert was acknowledged
    assert "payments open 5 0s ago" in shown
    assert "mail closed 0" in shown


def test_the_first_frame_has_no_rate_yet() -> None:
    assert "last 2s …" in text(frame(), rate=None, interval=2.0)


def test_rates_count_the_tasks_ended_between_frames() -> None:
    rates = Rates()

    assert rates.add(frame(), monotonic=10.0) is None
    more = frame(counts=dict.fromkeys(ProcessState, 0) | {ProcessState.PROCESSED: 10})
    assert rates.add(more, monotonic=12.0) == 2.0  # 6 ended, then 10: 4 in 2 s
    fewer = frame(counts=dict.fromkeys(ProcessState, 0))  # purged, or retried
    assert rates.add(fewer, monotonic=13.0) == 0.0
    assert rates.add(fewer, monotonic=13.0) is None  # no time passed: no rate
