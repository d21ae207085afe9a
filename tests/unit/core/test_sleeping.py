"""`core.sleeping`: a sleep's wake-up, its replay, and whether a task sleeps."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta, timezone

import pytest

from shepherd.core.compensation import plan
from shepherd.core.records import Step
from shepherd.core.replay import SLEEP_NAME, NonDeterminism
from shepherd.core.replay import decide as decide_call
from shepherd.core.sleeping import (
    Asleep,
    Awake,
    asleep_until,
    checked_until,
    decide,
    wake_at_after,
)
from shepherd.core.states import ProcessState, StepKind, StepState
from shepherd.core.timing import LATEST_DUE
from support.records import task_record

NOW = datetime(2030, 1, 1, 12, tzinfo=UTC)
HOUR = timedelta(hours=1)


def _sleep(seq: int = 2, wake_at: datetime | None = NOW + HOUR) -> Step:
    return Step(
        task_id="t1",
        seq=seq,
        agent=SLEEP_NAME,
        kind=StepKind.SLEEP,
        state=StepState.COMPLETED,
        attempt=1,
        complete_by=wake_at,
    )


def _forward(seq: int, state: StepState = StepState.COMPLETED, undo: str | None = None) -> Step:
    return Step(task_id="t1", seq=seq, agent="a", state=state, attempt=1, undo=undo)


def test_a_first_sleep_sleeps_until_its_instant_and_a_past_one_not_at_all() -> None:
    assert decide(None, 2, NOW + HOUR, now=NOW) == Asleep(wake_at=NOW + HOUR, recorded=False)
    assert decide(None, 2, NOW, now=NOW) == Awake()


def test_a_recorded_sleep_keeps_its_instant_and_sleeps_only_what_is_left() -> None:
    later = NOW + 5 * HOUR  # a replay computes its own instant afresh: the recorded one wins
    assert decide(_sleep(), 2, later, now=NOW) == Asleep(wake_at=NOW + HOUR, recorded=True)
    assert decide(_sleep(), 2, later, now=NOW + HOUR) == Awake()
    assert decide(_sleep(wake_at=None), 2, later, now=NOW) == Awake()


def test_a_sleep_where_a_call_was_recorded_and_the_reverse_are_non_determinism() -> None:
    assert decide(_forward(2), 2, NOW, now=NOW) == NonDeterminism(
        seq=2, recorded="a", called=SLEEP_NAME
    )
    assert decide_call(_sleep(), "a", 2) == NonDeterminism(seq=2, recorded=SLEEP_NAME, called="a")


@pytest.mark.parametrize(
    ("seconds", "says"),
    [
        (-1, "ctx.sleep's seconds must be >= 0 seconds, not -1"),
        (math.nan, "must be a finite number of seconds, not nan"),
        (-math.inf, "must be a finite number of seconds"),
        (10**400, "must be at most"),
        (True, "must be a number of seconds, not bool"),
    ],
)
def test_bad_seconds_are_refused_by_name(seconds: object, says: str) -> None:
    with pytest.raises(ValueError, match=r"ctx\.sleep's seconds") as refused:
        wake_at_after(seconds, now=NOW)
    assert says in str(refused.value)


def test_seconds_become_an_instant_no_later_than_the_latest_due() -> None:
    assert wake_at_after(90, now=NOW) == NOW + timedelta(seconds=90)
    assert wake_at_after(0, now=NOW) == NOW
    late = datetime(8999, 12, 31, tzinfo=UTC)
    assert wake_at_after(100 * 86400, now=late) == LATEST_DUE


def test_sleep_until_takes_aware_instants_only() -> None:
    assert checked_until(datetime(2030, 1, 1, 14, tzinfo=timezone(HOUR * 2))) == NOW
    with pytest.raises(ValueError, match="needs an aware datetime"):
        checked_until(datetime(2030, 1, 1))
    with pytest.raises(ValueError, match="needs a datetime, not str"):
        checked_until("2030-01-01")
    with pytest.raises(ValueError, match="out of range"):
        checked_until(datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14))))
    with pytest.raises(ValueError, match="before 9000"):
        checked_until(datetime(9500, 1, 1, tzinfo=UTC))


def test_a_task_sleeps_while_pending_unowned_and_its_latest_sleep_is_ahead() -> None:
    steps = (_forward(1), _sleep(2, NOW - HOUR), _sleep(3, NOW + HOUR))
    assert asleep_until(task_record(steps=steps), now=NOW) == NOW + HOUR
    assert asleep_until(task_record(steps=steps), now=NOW + HOUR) is None
    assert asleep_until(task_record(steps=steps[:2]), now=NOW) is None
    assert asleep_until(task_record(steps=()), now=NOW) is None
    owned = task_record(steps=steps, locked_by="s1", process_state=ProcessState.PROCESSING)
    assert asleep_until(owned, now=NOW) is None


def test_undo_steps_follow_a_sleep_never_take_its_seq() -> None:
    steps = [_forward(1, undo="unbook"), _sleep(2)]
    (undo,) = plan(steps)
    assert (undo.seq, undo.compensates) == (3, 1)
