"""Crash attribution: a dead process is not its tasks' failure; a poison is found by its step."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

import pytest

from shepherd.core.states import ProcessState
from shepherd.core.supervision import (
    CrashPolicy,
    Escalate,
    Reset,
    crash_entry,
    crashed_at,
    crashed_instances,
    on_crash,
    suspected,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from shepherd.core.records import Task

    TaskFactory = Callable[..., Task]

NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
POLICY = CrashPolicy(poison_crashes=3, max_owner_deaths=4)


def processing(task_factory: TaskFactory, **changes: object) -> Task:
    return task_factory(process_state=ProcessState.PROCESSING, locked_by="h:1:aa/s", **changes)


def test_an_owned_task_is_reset_at_once_without_a_failure(task_factory: TaskFactory) -> None:
    task = processing(task_factory, failure_count=2)
    verdict = on_crash(task, instance="h:1:aa", owned=True, running=None, policy=POLICY, now=NOW)
    assert isinstance(verdict, Reset)
    assert verdict.failure_count == 2
    assert verdict.not_before == NOW
    assert verdict.process_state is ProcessState.PENDING
    assert verdict.owner_deaths == 1
    assert verdict.crashes == ()
    assert "not counted as a failure" in verdict.reason


def test_a_task_running_in_the_dead_process_becomes_a_suspect_of_that_step(
    task_factory: TaskFactory,
) -> None:
    task = processing(task_factory)
    verdict = on_crash(task, instance="h:1:aa", owned=False, running=2, policy=POLICY, now=NOW)
    assert isinstance(verdict, Reset)
    assert verdict.crashes == ("h:1:aa#2",)
    assert verdict.owner_deaths == 0
    assert crashed_at(verdict.crashes, 2)
    assert not crashed_at(verdict.crashes, 1)


def test_a_task_neither_owned_nor_running_there_is_left_alone(task_factory: TaskFactory) -> None:
    task = processing(task_factory)
    assert (
        on_crash(task, instance="h:1:aa", owned=False, running=None, policy=POLICY, now=NOW) is None
    )


def test_the_same_step_at_three_crashes_is_quarantined_as_poison(
    task_factory: TaskFactory,
) -> None:
    crashes = (crash_entry("h:1:aa", 1), crash_entry("h:2:bb", 1))
    task = processing(task_factory, crashes=crashes, failure_count=0)
    verdict = on_crash(task, instance="h:3:cc", owned=True, running=1, policy=POLICY, now=NOW)
    assert isinstance(verdict, Escalate)
    assert verdict.failure_count == 0
    assert verdict.reason == (
        "suspected poison: running at 3 worker crashes (pids h:1, h:2, h:3), each time in step 1"
    )
    assert crashed_instances(verdict.crashes or ()) == ("h:1:aa", "h:2:bb", "h:3:cc")


def test_crashes_at_different_steps_are_a_neighbour_s_bad_luck_not_poison(
    task_factory: TaskFactory,
) -> None:
    crashes = (crash_entry("h:1:aa", 1), crash_entry("h:2:bb", 2))
    task = processing(task_factory, crashes=crashes)
    verdict = on_crash(task, instance="h:3:cc", owned=True, running=3, policy=POLICY, now=NOW)
    assert isinstance(verdict, Reset)
    assert len(verdict.crashes or ()) == 3


def test_owners_dying_too_often_end_in_error(task_factory: TaskFactory) -> None:
    task = processing(task_factory, owner_deaths=4)
    verdict = on_crash(task, instance="h:9:zz", owned=True, running=None, policy=POLICY, now=NOW)
    assert isinstance(verdict, Escalate)
    assert "died 5 times (max_owner_deaths=4)" in verdict.reason


def test_a_compensating_task_stays_compensating(task_factory: TaskFactory) -> None:
    task = task_factory(process_state=ProcessState.COMPENSATING, locked_by="h:1:aa/s")
    verdict = on_crash(task, instance="h:1:aa", owned=True, running=None, policy=POLICY, now=NOW)
    assert isinstance(verdict, Reset)
    assert verdict.process_state is ProcessState.COMPENSATING


@pytest.mark.parametrize("field", ["poison_crashes", "max_owner_deaths"])
def test_the_policy_refuses_a_bound_below_one(field: str) -> None:
    with pytest.raises(ValueError, match=field):
        CrashPolicy(**{field: 0})


def test_freezes_of_one_process_are_episodes_of_their_own(task_factory: TaskFactory) -> None:
    crashes = ("h:1:aa@1000#1", "h:1:aa@5000#1")
    task = processing(task_factory, crashes=crashes)
    verdict = on_crash(
        task, instance="h:2:bb@9000", owned=False, running=1, policy=POLICY, now=NOW, how="froze"
    )
    assert isinstance(verdict, Escalate)
    assert verdict.reason == (
        "suspected poison: running at 3 worker freezes (pids h:1, h:1, h:2), each time in step 1"
    )


def test_a_frozen_owner_resets_its_tasks_without_a_failure(task_factory: TaskFactory) -> None:
    task = processing(task_factory)
    verdict = on_crash(
        task, instance="h:1:aa@1", owned=True, running=None, policy=POLICY, now=NOW, how="froze"
    )
    assert isinstance(verdict, Reset)
    assert verdict.reason.startswith("process h:1 froze (no step of it was running there)")


def test_a_step_seen_at_one_crash_is_no_suspect_at_two_it_is(task_factory: TaskFactory) -> None:
    once = on_crash(
        processing(task_factory), instance="h:1:aa", owned=False, running=2, policy=POLICY, now=NOW
    )
    assert isinstance(once, Reset)
    assert not suspected(once.crashes or (), 2)  # runs again at full concurrency
    twice = on_crash(
        processing(task_factory, crashes=once.crashes),
        instance="h:2:bb",
        owned=False,
        running=2,
        policy=POLICY,
        now=NOW,
    )
    assert isinstance(twice, Reset)
    assert suspected(twice.crashes or (), 2)
    assert not suspected(twice.crashes or (), 1)


def test_two_crashes_at_different_steps_make_no_suspect(task_factory: TaskFactory) -> None:
    crashes = (crash_entry("h:1:aa", 1), crash_entry("h:2:bb", 2))
    assert not suspected(crashes, 1)
    assert not suspected(crashes, 2)


def test_the_same_process_twice_at_one_step_is_one_crash() -> None:
    assert not suspected((crash_entry("h:1:aa", 1), crash_entry("h:1:aa", 1)), 1)


def test_with_the_defaults_a_poison_causes_at_most_three_deaths(task_factory: TaskFactory) -> None:
    task = processing(task_factory)
    verdicts = []
    for n, instance in enumerate(("h:1:aa", "h:2:bb", "h:3:cc"), start=1):
        verdict = on_crash(
            task, instance=instance, owned=True, running=1, policy=CrashPolicy(), now=NOW
        )
        verdicts.append(verdict)
        if isinstance(verdict, Reset):
            task = processing(
                task_factory, crashes=verdict.crashes, owner_deaths=verdict.owner_deaths or n
            )
    assert [type(v) for v in verdicts] == [Reset, Reset, Escalate]
    assert task.failure_count == 0
