"""`core.children`: what a child's step replays, what its end writes, who goes with a parent."""

from __future__ import annotations

from shepherd.core import children as rules
from shepherd.core.records import Step
from shepherd.core.replay import NonDeterminism, Replay, ReplayFailure
from shepherd.core.states import StepKind, StepState


def _child_step(state: StepState, *, agent: str = "ship", policy: str = "wait") -> Step:
    return Step(
        task_id="p",
        seq=2,
        agent=agent,
        kind=StepKind.CHILD,
        state=state,
        request=rules.step_request(agent, "p.2", policy),
        result="done" if state is StepState.COMPLETED else None,
        error={"message": "no"} if state is StepState.FAILED else None,
    )


def test_a_child_step_replays_its_outcome_or_waits() -> None:
    assert rules.decide(None, 2, "ship") == rules.Start()
    assert rules.decide(_child_step(StepState.RUNNING), 2, "ship") == rules.Waiting()
    assert rules.decide(_child_step(StepState.COMPLETED), 2, "ship") == Replay(result="done")
    failed = rules.decide(_child_step(StepState.FAILED), 2, "ship")
    assert failed == ReplayFailure(error={"message": "no"})
    reset = rules.decide(_child_step(StepState.NOT_STARTED), 2, "ship")
    assert isinstance(reset, ReplayFailure)
    assert isinstance(reset.error, dict)
    assert "a retry does not start a child again" in str(reset.error["message"])


def test_another_child_or_a_call_at_the_seq_is_non_determinism() -> None:
    other = rules.decide(_child_step(StepState.RUNNING, agent="bill"), 2, "ship")
    assert other == NonDeterminism(seq=2, recorded="child bill", called="child ship")
    call = Step(task_id="p", seq=2, agent="pay", state=StepState.COMPLETED)
    assert rules.decide(call, 2, "ship") == NonDeterminism(
        seq=2, recorded="pay", called="child ship"
    )


def test_a_childs_end_completes_or_fails_its_parents_step() -> None:
    done = rules.step_outcome("p.2", "processed", {"id": 7}, None)
    assert (done.state, done.result, done.error) == ("completed", {"id": 7}, None)
    failed = rules.step_outcome("p.2", "compensated", None, {"reason": "out of stock"})
    assert failed.state == "failed"
    assert isinstance(failed.error, dict)
    assert failed.error["message"] == "child task p.2 ended compensated: out of stock"
    assert failed.error["reason"] == {"reason": "out of stock"}
    assert [rules.resumes(s) for s in ("processed", "compensated", "cancelled", "error")] == [
        True,
        True,
        True,
        False,
    ]


def test_which_children_go_with_an_ending_parent() -> None:
    assert rules.cancels("cancel", "pending", everything=False)
    assert rules.cancels("wait", "processing", everything=False)
    assert not rules.cancels("continue", "pending", everything=False)
    assert rules.cancels("continue", "error", everything=True)
    for state in ("processed", "compensated", "cancelled", "compensating"):
        assert not rules.cancels("cancel", state, everything=True)
    running = _child_step(StepState.RUNNING)
    ended = _child_step(StepState.COMPLETED)
    started = _child_step(StepState.COMPLETED, policy="cancel")
    kept = _child_step(StepState.COMPLETED, policy="continue")
    assert rules.may_cancel([running])
    assert rules.may_cancel([started])
    assert not rules.may_cancel([ended, kept])
    assert not rules.may_cancel([Step(task_id="p", seq=1, agent="a", state=StepState.RUNNING)])


def test_ids_links_and_limits() -> None:
    assert rules.child_id("abc", 3) == "abc.3"
    assert rules.parent_of("abc.3") == ("abc", 3)
    assert rules.parent_of("abc.3.12") == ("abc.3", 12)
    assert [rules.parent_of(t) for t in ("abc", ".3", "abc.x")] == [None, None, None]
    assert rules.default_key("abc", 3) == "abc/3"
    assert rules.child_links("p", [_child_step(StepState.RUNNING)]) == [(2, "p.2", "ship", "wait")]
    assert rules.depth_refused(rules.MAX_DEPTH) is None
    assert "at most 32 deep" in str(rules.depth_refused(rules.MAX_DEPTH + 1))
    assert rules.policy_refused("cancel") is None
    assert "not 'later'" in str(rules.policy_refused("later"))
