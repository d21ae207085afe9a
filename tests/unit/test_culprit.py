"""Reading a blocked thread's stack: whose code runs (agent, workflow, task, step) and where.

Each test runs a function in a thread of its own, held on an event, captures the
thread's innermost frame with `sys._current_frames()` and walks it.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType, SimpleNamespace

import pytest

from shepherd.agents import AgentWorker
from shepherd.culprit import Culprit, default_anchors, find_culprit, is_user_code
from shepherd.scheduler import Scheduler

PATIENCE = 10.0


@contextmanager
def stuck(target: Callable[[threading.Event, threading.Event], object]) -> Iterator[FrameType]:
    """Run `target(entered, release)` in a thread; yield its frame while it waits."""
    entered, release = threading.Event(), threading.Event()
    thread = threading.Thread(target=target, args=(entered, release), daemon=True)
    thread.start()
    try:
        assert entered.wait(PATIENCE), "the thread never started"
        assert thread.ident is not None
        frame = sys._current_frames()[thread.ident]
        yield frame
    finally:
        release.set()
        thread.join(PATIENCE)


def application_code(entered: threading.Event, release: threading.Event) -> None:
    entered.set()
    release.wait(PATIENCE)  # the culprit line


def fake_handle(entered: threading.Event, release: threading.Event) -> None:
    """Plays the agent worker's `_handle`: a `request` local, then the handler."""
    request = SimpleNamespace(agent="payments.charge", task_id="t-1", seq=3)
    application_code(entered, release)
    del request


def fake_run_workflow(entered: threading.Event, release: threading.Event) -> None:
    """Plays the scheduler's `_run_workflow`: a `ctx` local, then the workflow."""
    ctx = SimpleNamespace(task=SimpleNamespace(id="t-2", workflow="orders"))
    application_code(entered, release)
    del ctx


def fake_drive(entered: threading.Event, release: threading.Event) -> None:
    """Plays the scheduler's `_drive`: only a `task` local."""
    task = SimpleNamespace(id="t-3", workflow="refunds")
    application_code(entered, release)
    del task


def odd_handle(entered: threading.Event, release: threading.Event) -> None:
    request = "not a request"
    application_code(entered, release)
    del request


def test_an_agent_anchor_names_the_agent_task_and_step_and_the_user_line() -> None:
    with stuck(fake_handle) as frame:
        culprit = find_culprit(frame, anchors={fake_handle.__code__: "agent"})

    assert (culprit.agent, culprit.task_id, culprit.seq) == ("payments.charge", "t-1", 3)
    assert culprit.workflow is None
    assert culprit.user_frame is not None
    assert culprit.user_frame.function == "application_code"
    assert culprit.user_frame.file == __file__
    assert culprit.user_frame.source == "release.wait(PATIENCE)  # the culprit line"
    # Where the thread really is: inside the standard library's wait.
    assert culprit.innermost is not None
    assert os.path.basename(culprit.innermost.file) == "threading.py"
    assert culprit.whose() == "agent 'payments.charge' (task t-1, step 3)"
    where = culprit.where()
    assert where.startswith(f"at {__file__}:")
    assert "in application_code: release.wait(PATIENCE)" in where
    assert "inside " in where
    assert "threading.py" in where


def test_a_workflow_anchor_names_the_workflow_and_task() -> None:
    with stuck(fake_run_workflow) as frame:
        culprit = find_culprit(frame, anchors={fake_run_workflow.__code__: "workflow"})

    assert (culprit.workflow, culprit.task_id, culprit.agent) == ("orders", "t-2", None)
    assert culprit.whose() == "workflow 'orders' (task t-2)"


def test_a_task_local_is_enough_for_a_workflow_anchor() -> None:
    with stuck(fake_drive) as frame:
        culprit = find_culprit(frame, anchors={fake_drive.__code__: "workflow"})

    assert (culprit.workflow, culprit.task_id) == ("refunds", "t-3")


def test_the_innermost_anchor_wins() -> None:
    def outer(entered: threading.Event, release: threading.Event) -> None:
        task = SimpleNamespace(id="t-0", workflow="outer")
        fake_handle(entered, release)
        del task

    with stuck(outer) as frame:
        culprit = find_culprit(
            frame, anchors={fake_handle.__code__: "agent", outer.__code__: "workflow"}
        )
        outer_only = find_culprit(frame, anchors={outer.__code__: "workflow"})

    assert (culprit.agent, culprit.workflow) == ("payments.charge", None)
    assert (outer_only.workflow, outer_only.task_id) == ("outer", "t-0")


def test_no_anchor_names_only_the_place() -> None:
    with stuck(application_code) as frame:
        culprit = find_culprit(frame, anchors={})

    assert (culprit.agent, culprit.workflow, culprit.task_id, culprit.seq) == (None,) * 4
    assert culprit.whose() == "code outside any agent handler or workflow"
    assert culprit.user_frame is not None
    assert culprit.user_frame.function == "application_code"


def test_odd_locals_give_question_marks_not_errors() -> None:
    with stuck(odd_handle) as frame:
        culprit = find_culprit(frame, anchors={odd_handle.__code__: "agent"})

    assert (culprit.agent, culprit.task_id, culprit.seq) == ("?", None, None)


def test_without_application_code_the_frame_inside_the_anchor_is_shown() -> None:
    def anchor(entered: threading.Event, release: threading.Event) -> None:
        request = SimpleNamespace(agent="a", task_id="t", seq=1)
        entered.set()
        release.wait(PATIENCE)  # straight into the standard library
        del request

    with stuck(anchor) as frame:
        culprit = find_culprit(frame, anchors={anchor.__code__: "agent"})

    assert culprit.user_frame is not None
    assert culprit.user_frame.function == "wait"
    assert os.path.basename(culprit.user_frame.file) == "threading.py"


def test_a_culprit_without_frames_says_so() -> None:
    assert Culprit().where() == "at an unknown place (no Python frame)"


def test_the_default_anchors_are_the_roles_frames_with_the_locals_read() -> None:
    anchors = default_anchors()

    assert anchors == {
        AgentWorker._handle.__code__: "agent",
        Scheduler._run_workflow.__code__: "workflow",
        Scheduler._drive.__code__: "workflow",
    }
    # Renaming these locals would blind the watchdog: this test says so first.
    assert "request" in AgentWorker._handle.__code__.co_varnames
    assert "ctx" in Scheduler._run_workflow.__code__.co_varnames
    assert "task" in Scheduler._drive.__code__.co_varnames


@pytest.mark.parametrize(
    ("filename", "user"),
    [
        (__file__, True),
        (threading.__file__, False),
        (sys.modules["shepherd.culprit"].__file__, False),
        ("<frozen importlib._bootstrap>", False),
        ("", False),
        ("/srv/venv/lib/python3.11/site-packages/requests/api.py", False),
        ("/usr/lib/python3/dist-packages/yaml/__init__.py", False),
        ("/srv/shop/handlers.py", True),
    ],
)
def test_application_code_is_neither_the_stdlib_nor_packages_nor_shepherd(
    filename: str, user: bool
) -> None:
    assert is_user_code(filename) is user
