"""What a blocked event loop is running: the agent or workflow, its task, and the line.

The watchdog reads the loop thread's stack (`sys._current_frames()`) and walks it
outwards from the innermost frame: the first frame of an *anchor* (the agent
worker's `_handle`, the scheduler's `_run_workflow` or `_drive`) tells whose
code runs; the innermost frame of application code tells where.
"""

from __future__ import annotations

import functools
import linecache
import os
import sysconfig
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, final

if TYPE_CHECKING:
    from collections.abc import Mapping
    from types import CodeType, FrameType

__all__ = ["Culprit", "Where", "default_anchors", "find_culprit"]

#: What an anchor frame runs: an agent's handler (local `request`) or a workflow
#: (local `ctx`, or `task`).
AnchorKind = Literal["agent", "workflow"]


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Where:
    """One frame: file, line, function and the line's source text."""

    file: str
    line: int
    function: str
    #: The line's text, stripped; empty when the source cannot be read.
    source: str = ""

    def __str__(self) -> str:
        text = f"{self.file}:{self.line} in {self.function}"
        return f"{text}: {self.source}" if self.source else text

    @classmethod
    def of(cls, frame: FrameType) -> Where:
        """The frame's current position."""
        code = frame.f_code
        line = frame.f_lineno or 0
        source = linecache.getline(code.co_filename, line).strip() if line else ""
        return cls(file=code.co_filename, line=line, function=code.co_name, source=source)


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Culprit:
    """Whose code a thread is running, and where."""

    #: The agent whose handler runs, if one does.
    agent: str | None = None
    #: The workflow that runs, if one does (and no agent's handler inside it).
    workflow: str | None = None
    task_id: str | None = None
    #: The step being handled (agents only).
    seq: int | None = None
    #: The innermost frame of application code: not the standard library, an
    #: installed package or shepherd; else the handler's or workflow's own frame.
    user_frame: Where | None = None
    #: The innermost frame: where the thread is right now.
    innermost: Where | None = None

    def whose(self) -> str:
        """`agent 'x' (task T, step 2)`, `workflow 'w' (task T)`, or `code outside ...`."""
        if self.agent is not None:
            return f"agent {self.agent!r} (task {self.task_id}, step {self.seq})"
        if self.workflow is not None:
            return f"workflow {self.workflow!r} (task {self.task_id})"
        return "code outside any agent handler or workflow"

    def where(self) -> str:
        """`at FILE:LINE in FUNCTION: SOURCE` (plus the innermost frame if it differs)."""
        if self.user_frame is None and self.innermost is None:
            return "at an unknown place (no Python frame)"
        shown = self.user_frame or self.innermost
        text = f"at {shown}"
        if self.innermost is not None and self.innermost != shown:
            text += f", inside {self.innermost}"
        return text


def find_culprit(
    frame: FrameType, *, anchors: Mapping[CodeType, AnchorKind] | None = None
) -> Culprit:
    """Whose code runs in `frame` (a thread's innermost frame) and where.

    Args:
        frame: The innermost frame of the thread (`sys._current_frames()[ident]`).
        anchors: Code objects whose frames tell whose code runs, and of which kind;
            `default_anchors()` when None.

    Returns:
        The culprit; fields it cannot tell are None. Never raises on odd locals.
    """
    anchors = default_anchors() if anchors is None else anchors
    innermost = Where.of(frame)
    user: Where | None = None
    current: FrameType | None = frame
    previous: FrameType | None = None
    while current is not None:
        kind = anchors.get(current.f_code)
        if kind is not None:
            if user is None and previous is not None:
                user = Where.of(previous)  # the handler or workflow function itself
            return _identify(kind, current, user_frame=user, innermost=innermost)
        if user is None and is_user_code(current.f_code.co_filename):
            user = Where.of(current)
        previous, current = current, current.f_back
    return Culprit(user_frame=user, innermost=innermost)


def _identify(
    kind: AnchorKind, frame: FrameType, *, user_frame: Where | None, innermost: Where
) -> Culprit:
    """The culprit named by an anchor frame's locals: agent, workflow, task and step."""
    local = frame.f_locals
    if kind == "agent":
        request = local.get("request")
        return Culprit(
            agent=_text(getattr(request, "agent", None)) or "?",
            task_id=_text(getattr(request, "task_id", None)),
            seq=_number(getattr(request, "seq", None)),
            user_frame=user_frame,
            innermost=innermost,
        )
    task = getattr(local.get("ctx"), "task", None) or local.get("task")
    return Culprit(
        workflow=_text(getattr(task, "workflow", None)) or "?",
        task_id=_text(getattr(task, "id", None)),
        user_frame=user_frame,
        innermost=innermost,
    )


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _number(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@functools.cache
def default_anchors() -> Mapping[CodeType, AnchorKind]:
    """The frames that say whose code runs: an agent worker's, a scheduler's.

    Call it (and `is_user_code`) once before a watchdog thread needs it: a thread
    that imports while the loop's thread is stuck inside an import would hang.
    """
    from shepherd.agents.worker import AgentWorker
    from shepherd.scheduler.scheduler import Scheduler

    return {
        AgentWorker._handle.__code__: "agent",
        Scheduler._run_workflow.__code__: "workflow",
        Scheduler._drive.__code__: "workflow",
    }


@functools.cache
def _prefixes() -> tuple[str, ...]:
    """The standard library's directories and shepherd's own."""
    paths = sysconfig.get_paths()
    # This module's directory is the package's: no `import shepherd`, which would
    # make this module depend on the App the package exports.
    roots = {paths["stdlib"], paths["platstdlib"], os.path.dirname(os.path.abspath(__file__))}
    return tuple(os.path.join(os.path.realpath(p), "") for p in roots)


_NOT_USER = frozenset({"site-packages", "dist-packages"})


@functools.lru_cache(maxsize=1024)
def is_user_code(filename: str) -> bool:
    """Whether a code file is the application's: not the standard library, an
    installed package or shepherd itself (nor a frozen or generated module)."""
    if not filename or filename.startswith("<"):
        return False
    path = os.path.realpath(filename)
    if path.startswith(_prefixes()):
        return False
    return _NOT_USER.isdisjoint(path.split(os.sep))
