"""The watchdog: tells an operator, while it happens, that code is blocking the event loop.

One coroutine that does not yield (a `time.sleep`, a blocking HTTP client, a long
computation) stops every role of its process: every other handler, workflow and
heartbeat waits, and their deadlines pass. A daemon thread asks the loop to run
a tiny callback every `interval` seconds; when one has waited longer than
`threshold`, it reads the loop thread's stack and logs one warning naming the
agent or workflow, its task and the line that blocks (see `shepherd.culprit`),
while the loop is still blocked; when the loop answers again, one INFO line
says for how long it was blocked. A loop found waiting in its selector for I/O
is idle, not blocked: it is not asked (so an idle process is not woken ten
times a second).
"""

from __future__ import annotations

import asyncio
import logging
import selectors
import sys
import threading
import time
from asyncio import base_events
from dataclasses import dataclass
from typing import TYPE_CHECKING, final

from shepherd.culprit import Culprit, default_anchors, find_culprit, is_user_code
from shepherd.tasklog import task_fields

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from types import CodeType

    from shepherd.culprit import AnchorKind

__all__ = ["Watchdog", "WatchdogStatistics"]

log = logging.getLogger("shepherd.watchdog")

#: Most seconds between two heartbeats of the loop.
MAX_INTERVAL = 0.1

#: Where an asyncio loop waits for I/O: a `selectors` method called by its `_run_once`
#: (None where that method is gone: every look then asks the loop).
_SELECTORS = selectors.__file__
_RUN_ONCE = getattr(getattr(base_events.BaseEventLoop, "_run_once", None), "__code__", None)


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class WatchdogStatistics:
    """What a watchdog has seen so far."""

    #: Times the loop was blocked longer than the threshold.
    episodes: int
    #: The longest of those blocks, in seconds (the current one included).
    longest_block: float
    #: How long the loop has been blocked now, in seconds; 0.0 when it runs.
    blocked_for: float


@final
class Watchdog:
    """Watches one event loop from a daemon thread.

    Args:
        threshold: Seconds the loop may go without answering before a warning.
        interval: Seconds between heartbeats (default: the smaller of 0.1 s
            and half the threshold).
        on_block: Called (in the watchdog's thread) once per episode, as it warns.
    """

    def __init__(
        self,
        *,
        threshold: float,
        interval: float | None = None,
        on_block: Callable[[], object] | None = None,
    ) -> None:
        if threshold <= 0:
            raise ValueError(f"threshold must be positive, not {threshold}")
        self.threshold = threshold
        self.interval = min(MAX_INTERVAL, threshold / 2) if interval is None else interval
        self._on_block = on_block
        self._anchors: Mapping[CodeType, AnchorKind] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self._thread: threading.Thread | None = None
        self._starts = 0
        self._stopping = threading.Event()
        #: When the heartbeat in flight was sent (monotonic), or None.
        self._sent: float | None = None
        #: Written by the loop: (when the heartbeat it ran was sent, when it ran).
        self._ran: tuple[float, float] | None = None
        #: The culprit of the episode in progress, and when its late heartbeat was sent.
        self._episode: tuple[Culprit, float] | None = None
        self._episodes = 0
        self._longest = 0.0
        self._failures = 0

    def statistics(self) -> WatchdogStatistics:
        """Episodes so far, the longest block, and the current one."""
        episode = self._episode
        blocked = 0.0 if episode is None else time.monotonic() - episode[1]
        return WatchdogStatistics(
            episodes=self._episodes,
            longest_block=max(self._longest, blocked),
            blocked_for=blocked,
        )

    def start(self) -> None:
        """Start watching the running event loop (call this from the loop's thread).

        Starts nest: a second `start` on the same loop (two `App.run` at once) needs
        a second `stop` before the thread ends.

        Raises:
            RuntimeError: No event loop runs in this thread, or the watchdog already
                watches another loop.
        """
        loop = asyncio.get_running_loop()
        if self._thread is not None:
            if loop is not self._loop:
                raise RuntimeError("this watchdog already watches another event loop")
            self._starts += 1
            return
        self._starts = 1
        # Imports done now, on the loop's thread: the watchdog's thread must never
        # import (the loop's thread may be stuck inside an import, holding its lock).
        self._anchors = default_anchors()
        is_user_code(__file__)
        self._loop = loop
        self._loop_thread = threading.get_ident()
        self._stopping.clear()
        self._sent = self._ran = self._episode = None
        self._thread = threading.Thread(target=self._watch, name="shepherd-watchdog", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop watching (after as many stops as starts); the thread ends at once."""
        self._starts = max(0, self._starts - 1)
        if self._starts > 0:
            return
        thread, self._thread = self._thread, None
        self._stopping.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5.0)

    @property
    def running(self) -> bool:
        """Whether the watchdog's thread is alive."""
        thread = self._thread
        return thread is not None and thread.is_alive()

    # -- the loop's side: the only work the watchdog asks of it ------------------------
    def _beat(self, sent: float) -> None:
        self._ran = (sent, time.monotonic())

    # -- the watchdog's thread ------------------------------------------------------------
    def _watch(self) -> None:
        while not self._stopping.is_set():
            try:
                if not self._tick(time.monotonic()):
                    return
            except Exception:
                # Never die quietly: say so once per run of failures, and carry on.
                self._failures += 1
                if self._failures == 1:
                    log.exception("the event loop watchdog failed; it carries on")
            else:
                if self._failures:
                    log.info(
                        "the event loop watchdog works again after %d failures", self._failures
                    )
                    self._failures = 0
            self._stopping.wait(self.interval)

    def _tick(self, now: float) -> bool:
        """One look at the loop; False once the loop is closed (nothing left to watch)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            log.debug("the event loop is closed: the watchdog stops")
            return False
        sent, ran = self._sent, self._ran
        if sent is not None:
            if ran is None or ran[0] != sent:
                self._waiting(sent, now)
                return True
            self._sent = None
            if self._episode is not None:
                self._unblocked(ran[1] - sent)
        if self._idle():
            return True  # waiting for I/O: nothing to ask, and no reason to wake it
        self._sent = now
        loop.call_soon_threadsafe(self._beat, now)
        return True

    def _idle(self) -> bool:
        """Whether the loop's thread waits in the loop's own selector call (it is idle).

        Only that call qualifies: the selector's method, called by `_run_once`.
        Code that blocks in a selector of its own is called by a callback.
        """
        frame = sys._current_frames().get(self._loop_thread)
        try:
            if frame is None or _RUN_ONCE is None or frame.f_code.co_filename != _SELECTORS:
                return False
            caller = frame.f_back
            return caller is not None and caller.f_code is _RUN_ONCE
        finally:
            del frame  # a frame holds its locals: do not keep it past this look

    def _waiting(self, sent: float, now: float) -> None:
        """The heartbeat sent at `sent` has not run yet."""
        lag = now - sent
        if lag < self.threshold:
            return
        if self._episode is not None:
            self._longest = max(self._longest, lag)
            return
        culprit = self._culprit()
        self._episode = (culprit, sent)
        self._episodes += 1
        self._longest = max(self._longest, lag)
        hint = (
            "a workflow must not block: move the blocking work into an agent"
            if culprit.workflow is not None and culprit.agent is None
            else "run blocking code in a threads=True agent, or with asyncio.to_thread"
        )
        log.warning(
            "event loop blocked for %.1f s (block_warning is %g s) by %s %s; nothing else "
            "in this process runs until it returns (%s)",
            lag,
            self.threshold,
            culprit.whose(),
            culprit.where(),
            hint,
            extra={"culprit": culprit, "blocked_for": lag, **_fields(culprit)},
        )
        if self._on_block is not None:
            self._on_block()

    def _unblocked(self, blocked: float) -> None:
        culprit = Culprit() if self._episode is None else self._episode[0]
        self._episode = None
        self._longest = max(self._longest, blocked)
        log.info(
            "event loop unblocked after %.1f s; it was blocked by %s",
            blocked,
            culprit.whose(),
            extra={"culprit": culprit, "blocked_for": blocked, **_fields(culprit)},
        )

    def _culprit(self) -> Culprit:
        """What the loop's thread runs now; an empty culprit if its stack cannot be read."""
        frame = sys._current_frames().get(self._loop_thread)
        try:
            return Culprit() if frame is None else find_culprit(frame, anchors=self._anchors)
        except Exception:  # the warning matters more than its details
            log.exception("could not tell what blocks the event loop")
            return Culprit()
        finally:
            del frame  # a frame holds its locals: do not keep it past this look


def _fields(culprit: Culprit) -> dict[str, object]:
    """The task fields of a line whose culprit is a task's workflow or step (else none)."""
    if culprit.task_id is None:
        return {}
    return task_fields(
        culprit.task_id, culprit.workflow, epoch=None, seq=culprit.seq, agent=culprit.agent
    )
