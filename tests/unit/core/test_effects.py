"""What the owner's, the supervisor's and the crash verdicts' writes do, as both stores write them."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shepherd.core import effects
from shepherd.core import transitions as tr
from shepherd.core.effects import UNCHANGED, Claim, TaskEffect, apply_effect
from shepherd.core.events import EventKind
from shepherd.core.records import Task
from shepherd.core.states import CLAIMABLE_STATES, TERMINAL_STATES, ProcessState
from shepherd.core.supervision import (
    BackoffPolicy,
    Compensate,
    CrashPolicy,
    Escalate,
    Reset,
    SupervisionPolicy,
    on_crash,
    on_expired,
    on_store_outage,
)

if TYPE_CHECKING:
    from shepherd.core.supervision import Decision

P = ProcessState
NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
LATER = NOW + timedelta(seconds=90)
SUPERVISED = (P.PROCESSING, P.COMPENSATING)


def _task(**changes: Any) -> Task:
    task = Task(
        id="t1",
        workflow="orders.place",
        key="k",
        input={"order": 1},
        process_state=P.PROCESSING,
        locked_by="h:1:aa/s",
        lock_epoch=3,
        complete_by=NOW - timedelta(seconds=1),
        failure_count=1,
        not_before=NOW - timedelta(seconds=60),
        reply_to="replies",
        created_at=NOW,
        updated_at=NOW,
        result={"old": "result"},
        error={"old": "error"},
        crashes=("h:0:zz#1",),
        owner_deaths=2,
    )
    return replace(task, **changes)


# -- strategies ----------------------------------------------------------------
reasons = st.text(max_size=20)
counts = st.integers(0, 50)
instants = st.datetimes(
    min_value=datetime(2020, 1, 1), max_value=datetime(2040, 1, 1), timezones=st.just(UTC)
)
crash_lists = st.none() | st.lists(st.text(min_size=1, max_size=8), max_size=4).map(tuple)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)


@st.composite
def resets(draw: st.DrawFn, *, crashed: bool = False) -> Reset:
    return Reset(
        failure_count=draw(counts),
        not_before=draw(instants),
        process_state=draw(st.sampled_from([P.PENDING, P.COMPENSATING])),
        reason=draw(reasons),
        crashes=draw(crash_lists) if crashed else None,
        owner_deaths=draw(st.none() | counts) if crashed else None,
    )


@st.composite
def escalations(draw: st.DrawFn, *, crashed: bool = False) -> Escalate:
    return Escalate(
        failure_count=draw(counts),
        reason=draw(reasons),
        crashes=draw(crash_lists) if crashed else None,
        owner_deaths=draw(st.none() | counts) if crashed else None,
    )


decisions: st.SearchStrategy[Decision] = st.one_of(
    resets(), escalations(), st.builds(Compensate, failure_count=counts, reason=reasons)
)
verdicts: st.SearchStrategy[Reset | Escalate] = resets(crashed=True) | escalations(crashed=True)


def _every_effect(draw: st.DrawFn) -> TaskEffect:
    kind = draw(st.sampled_from(["supervision", "crash", "finish", "fail", "compensation"]))
    if kind == "supervision":
        return effects.on_supervision(draw(decisions), now=draw(instants))
    if kind == "crash":
        return effects.on_crash(draw(verdicts))
    if kind == "finish":
        return effects.on_finish(draw(json_values))
    if kind == "fail":
        return effects.on_fail(
            draw(st.sampled_from(sorted(effects.FAIL_STATES))), draw(json_values)
        )
    return effects.on_start_compensation(draw(json_values))


any_effects = st.composite(_every_effect)()


# -- the rows both stores write today --------------------------------------------
def test_a_supervisor_reset_revokes_the_claim_and_counts_the_failure() -> None:
    decision = Reset(failure_count=2, not_before=LATER, process_state=P.PENDING, reason="slow")
    effect = effects.on_supervision(decision, now=NOW)
    assert effect == TaskEffect(
        process_state=P.PENDING,
        claim=Claim.REVOKED,
        failure_count=2,
        not_before=LATER,
        drop_requests=True,
        event=EventKind.RESET,
        detail={"reason": "slow", "failure_count": 2},
    )
    assert effect.error is UNCHANGED
    assert effect.result is UNCHANGED
    assert (effect.crashes, effect.owner_deaths) == (None, None)


def test_a_supervisor_escalation_stores_the_reason_as_the_error() -> None:
    effect = effects.on_supervision(Escalate(failure_count=3, reason="too slow"), now=NOW)
    assert effect == TaskEffect(
        process_state=P.ERROR,
        claim=Claim.REVOKED,
        failure_count=3,
        error={"reason": "too slow"},
        drop_requests=True,
        event=EventKind.ERROR,
        detail={"error": {"reason": "too slow"}, "failure_count": 3},
    )
    assert effect.not_before is None  # left as it is


def test_a_supervisor_compensation_is_claimable_at_the_write() -> None:
    effect = effects.on_supervision(Compensate(failure_count=0, reason="r"), now=NOW)
    assert effect == TaskEffect(
        process_state=P.COMPENSATING,
        claim=Claim.REVOKED,
        failure_count=0,
        not_before=NOW,
        error={"reason": "r"},
        drop_requests=True,
        event=EventKind.COMPENSATING,
        detail={"error": {"reason": "r"}},
    )


def test_a_crash_reset_records_the_crashes_and_leaves_the_failures() -> None:
    verdict = Reset(
        failure_count=1,
        not_before=NOW,
        process_state=P.COMPENSATING,
        reason="process h:1 crashed",
        crashes=("h:1:aa#2",),
        owner_deaths=3,
    )
    assert effects.on_crash(verdict) == TaskEffect(
        process_state=P.COMPENSATING,
        claim=Claim.REVOKED,
        not_before=NOW,
        crashes=("h:1:aa#2",),
        owner_deaths=3,
        drop_requests=True,
        event=EventKind.RESET,
        detail={"reason": "process h:1 crashed", "failure_count": 1, "crashes": ["h:1:aa#2"]},
    )


def test_a_crash_escalation_stores_the_crashes_in_the_error_but_not_in_the_event() -> None:
    verdict = Escalate(failure_count=1, reason="poison", crashes=("a#2", "b#2"), owner_deaths=0)
    effect = effects.on_crash(verdict)
    assert effect == TaskEffect(
        process_state=P.ERROR,
        claim=Claim.REVOKED,
        error={"reason": "poison", "crashes": ["a#2", "b#2"]},
        crashes=("a#2", "b#2"),
        owner_deaths=0,
        drop_requests=True,
        event=EventKind.ERROR,
        detail={"error": {"reason": "poison"}, "failure_count": 1},
    )
    assert effect.failure_count is None
    assert effect.not_before is None


def test_a_verdict_without_crash_columns_stores_none_and_zero() -> None:
    effect = effects.on_crash(Escalate(failure_count=1, reason="r"))
    assert (effect.crashes, effect.owner_deaths) == ((), 0)
    assert effect.error == {"reason": "r", "crashes": []}


def test_finish_releases_the_claim_keeps_the_requests_and_echoes_the_result() -> None:
    effect = effects.on_finish({"total": 3})
    assert effect == TaskEffect(
        process_state=P.PROCESSED,
        claim=Claim.RELEASED,
        result={"total": 3},
        drop_requests=False,
        event=EventKind.PROCESSED,
        echo="result",
    )
    assert effect.error is UNCHANGED
    assert effect.event_detail() == {"result": {"total": 3}}


@pytest.mark.parametrize(
    ("state", "kind"),
    [
        (P.ERROR, EventKind.ERROR),
        (P.COMPENSATED, EventKind.COMPENSATED),
        (P.CANCELLED, EventKind.CANCELLED),
    ],
)
def test_fail_ends_the_task_in_its_state_and_echoes_the_error(
    state: ProcessState, kind: EventKind
) -> None:
    effect = effects.on_fail(state, {"e": 1})
    assert effect == TaskEffect(
        process_state=state,
        claim=Claim.RELEASED,
        error={"e": 1},
        drop_requests=True,
        event=kind,
        echo="error",
    )
    assert effect.event_detail() == {"error": {"e": 1}}


def test_fail_stores_a_null_error_as_a_value() -> None:
    effect = effects.on_fail(P.ERROR, None)
    assert effect.error is None
    assert apply_effect(_task(), effect, now=NOW).error is None


@pytest.mark.parametrize("state", sorted(set(P) - effects.FAIL_STATES))
def test_fail_refuses_a_state_that_is_not_an_end(state: ProcessState) -> None:
    with pytest.raises(ValueError, match=f"not '{state}'"):
        effects.on_fail(state, "x")


def test_start_compensation_keeps_the_claim_and_restarts_the_failures() -> None:
    effect = effects.on_start_compensation("declined")
    assert effect == TaskEffect(
        process_state=P.COMPENSATING,
        claim=Claim.KEPT,
        failure_count=0,
        error="declined",
        drop_requests=False,
        event=EventKind.COMPENSATING,
        echo="error",
    )
    assert effect.event_detail() == {"error": "declined"}


def test_the_event_detail_is_a_copy() -> None:
    effect = effects.on_supervision(Compensate(failure_count=0, reason="r"), now=NOW)
    detail = effect.event_detail()
    detail["more"] = 1
    assert effect.detail == {"error": {"reason": "r"}}


# -- applying an effect to a record ------------------------------------------------
def test_a_kept_claim_stays_with_its_owner() -> None:
    task = apply_effect(_task(), effects.on_start_compensation("e"), now=LATER)
    assert (task.locked_by, task.lock_epoch, task.complete_by) == (
        "h:1:aa/s",
        3,
        NOW - timedelta(seconds=1),
    )
    assert (task.failure_count, task.error, task.updated_at) == (0, "e", LATER)


def test_a_released_claim_keeps_its_epoch() -> None:
    task = apply_effect(_task(), effects.on_finish(7), now=LATER)
    assert (task.locked_by, task.lock_epoch, task.complete_by) == (None, 3, None)
    assert (task.result, task.error) == (7, {"old": "error"})


def test_a_revoked_claim_bumps_the_epoch() -> None:
    verdict = Reset(
        failure_count=1,
        not_before=LATER,
        process_state=P.PENDING,
        reason="r",
        crashes=("h:0:zz#1", "h:1:aa#2"),
        owner_deaths=3,
    )
    task = apply_effect(_task(), effects.on_crash(verdict), now=NOW)
    assert (task.locked_by, task.lock_epoch, task.complete_by) == (None, 4, None)
    assert (task.crashes, task.owner_deaths) == (("h:0:zz#1", "h:1:aa#2"), 3)
    assert (task.not_before, task.error, task.failure_count) == (LATER, {"old": "error"}, 1)


@given(effect=any_effects, now=instants)
def test_an_effect_changes_only_what_it_names(effect: TaskEffect, now: datetime) -> None:
    before = _task()
    after = apply_effect(before, effect, now=now)
    untouched = ("id", "workflow", "key", "input", "reply_to", "created_at", "cancel_requested")
    assert all(getattr(after, name) == getattr(before, name) for name in untouched)
    assert after.updated_at == now
    assert after.process_state is effect.process_state
    if effect.failure_count is None:
        assert after.failure_count == before.failure_count
    if effect.not_before is None:
        assert after.not_before == before.not_before
    if effect.error is UNCHANGED:
        assert after.error == before.error
    if effect.result is UNCHANGED:
        assert after.result == before.result
    if effect.crashes is None:
        assert (after.crashes, after.owner_deaths) == (before.crashes, before.owner_deaths)


# -- properties ------------------------------------------------------------------
@given(effect=any_effects)
def test_the_event_is_named_after_the_state_unless_it_is_a_reset(effect: TaskEffect) -> None:
    if effect.event is EventKind.RESET:
        assert effect.process_state in CLAIMABLE_STATES
        assert effect.claim is Claim.REVOKED
    else:
        assert effect.event.value == effect.process_state.value


@given(effect=any_effects)
def test_a_task_that_ends_is_unowned_and_wakes_its_waiters(effect: TaskEffect) -> None:
    assert effect.terminal is (effect.process_state in TERMINAL_STATES)
    if effect.terminal:
        assert effect.claim is not Claim.KEPT
    if effect.claim is Claim.KEPT:
        assert not effect.drop_requests  # the owner works on: its requests are wanted


@given(effect=any_effects)
def test_an_echo_repeats_what_the_write_stores(effect: TaskEffect) -> None:
    detail = effect.event_detail()
    if effect.echo is not None:
        assert effect.echo not in effect.detail
        assert detail[effect.echo] == getattr(effect, effect.echo)
        assert getattr(effect, effect.echo) is not UNCHANGED
    else:
        assert detail == effect.detail


@given(decision=decisions, now=instants)
def test_every_supervisor_decision_revokes_the_claim_and_sets_the_failures(
    decision: Decision, now: datetime
) -> None:
    effect = effects.on_supervision(decision, now=now)
    assert effect.claim is Claim.REVOKED
    assert effect.drop_requests
    assert effect.failure_count == decision.failure_count
    expected = {
        Reset: EventKind.RESET,
        Escalate: EventKind.ERROR,
        Compensate: EventKind.COMPENSATING,
    }
    assert effect.event is expected[type(decision)]
    if isinstance(decision, Reset):
        assert (effect.process_state, effect.not_before) == (
            decision.process_state,
            decision.not_before,
        )
        assert effect.error is UNCHANGED
    else:
        assert effect.error == {"reason": decision.reason}


@given(
    state=st.sampled_from(SUPERVISED),
    failures=counts,
    deaths=counts,
    crashes=st.lists(st.sampled_from(["h:1:a#1", "h:2:b#1", "h:3:c#2"]), max_size=3, unique=True),
    owned=st.booleans(),
    running=st.none() | st.integers(1, 2),
    instance=st.sampled_from(["h:1:a", "h:4:d"]),
)
def test_a_crash_never_changes_the_failures_and_never_forgets_a_crash(
    state: ProcessState,
    failures: int,
    deaths: int,
    crashes: list[str],
    owned: bool,
    running: int | None,
    instance: str,
) -> None:
    task = _task(
        process_state=state, failure_count=failures, owner_deaths=deaths, crashes=tuple(crashes)
    )
    verdict = on_crash(
        task, instance=instance, owned=owned, running=running, policy=CrashPolicy(), now=NOW
    )
    if verdict is None:
        return
    effect = effects.on_crash(verdict)
    assert effect.failure_count is None
    after = tr.apply_crash(task, verdict, now=NOW)
    assert after.failure_count == task.failure_count
    assert set(task.crashes) <= set(after.crashes)
    assert after.owner_deaths >= task.owner_deaths
    assert (after.locked_by, after.lock_epoch) == (None, task.lock_epoch + 1)


@given(
    state=st.sampled_from(SUPERVISED),
    failures=st.integers(0, 5),
    max_failures=st.integers(1, 5),
    on_exhausted=st.sampled_from(["error", "compensate"]),
    seed=st.integers(0, 100),
    outage=st.booleans(),
)
def test_the_model_applies_what_the_supervisor_decides(
    state: ProcessState,
    failures: int,
    max_failures: int,
    on_exhausted: str,
    seed: int,
    outage: bool,
) -> None:
    task = _task(process_state=state, failure_count=failures)
    policy = SupervisionPolicy(
        max_failures=max_failures,
        on_exhausted="compensate" if on_exhausted == "compensate" else "error",
        backoff=BackoffPolicy(initial=1.0),
    )
    decision = (
        on_store_outage(task, now=NOW)
        if outage
        else on_expired(task, policy, now=NOW, rng=random.Random(seed))
    )
    after = tr.apply(task, decision, now=NOW)
    assert after == apply_effect(task, effects.on_supervision(decision, now=NOW), now=NOW)
    if not isinstance(decision, Compensate):
        assert after.failure_count >= task.failure_count  # only compensation restarts the count


# -- the model's crash transition ------------------------------------------------
def test_a_crash_is_applied_to_a_claim_that_has_not_expired() -> None:
    task = _task(complete_by=LATER)
    verdict = Escalate(failure_count=1, reason="poison", crashes=("a#1",), owner_deaths=2)
    after = tr.apply_crash(task, verdict, now=NOW)
    assert after.process_state is P.ERROR
    assert after.error == {"reason": "poison", "crashes": ["a#1"]}


def test_a_crash_verdict_needs_a_claimed_task() -> None:
    verdict = Escalate(failure_count=1, reason="r", crashes=(), owner_deaths=0)
    with pytest.raises(tr.IllegalTransition, match="not claimed"):
        tr.apply_crash(_task(locked_by=None), verdict, now=NOW)
    with pytest.raises(tr.IllegalTransition):
        tr.apply_crash(_task(process_state=P.PENDING), verdict, now=NOW)


def test_a_crash_reset_keeps_a_compensation_compensating() -> None:
    reset = Reset(failure_count=1, not_before=NOW, process_state=P.PENDING, reason="r")
    with pytest.raises(tr.IllegalTransition, match="a reset leads to compensating"):
        tr.apply_crash(_task(process_state=P.COMPENSATING), reset, now=NOW)
    kept = replace(reset, process_state=P.COMPENSATING)
    after = tr.apply_crash(_task(process_state=P.COMPENSATING), kept, now=NOW)
    assert after.process_state is P.COMPENSATING
