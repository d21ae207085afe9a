"""Whether a scheduler claims its next tasks on their own, or with their first write.

A claim of its own is one transaction, and its tasks' first steps start in
later ones. A scheduler with little to do can do better: it peeks at the
tasks a claim would take (a read, no commit), replays each, and claims it in
the transaction of its first write (the start of its next step, its sleep or
its end), so that a lone task's claim costs no commit of its own, and a task
woken from a sleep resumes with one transaction as a step's reply does.

Under load the claim of its own is better: one claims a batch of tasks at
once (its commit shared by all of them), and many schedulers peeking at the
same tasks would replay them in vain (only one claim can win). So a
scheduler peeks only while it runs fewer than `PEEK_BELOW` tasks, at most as
many as leave it under that, and only while the queue is shallow: once a
look found more tasks than it takes (a peek asks for one more than it
drives; a claim found all it asked for), more wait, and claims of their own
take them, a batch at a time, until one finds fewer.
Without that, a scheduler whose tasks end fast would peek a few at a time
for ever and run no more than `PEEK_BELOW` at once.
"""

from __future__ import annotations

__all__ = ["PEEK_BELOW", "peek_limit"]

PEEK_BELOW = 4


def peek_limit(running: int, free: int, *, deep: bool) -> int:
    """How many tasks to peek at (0: claim as usual).

    Args:
        running: The tasks this scheduler runs now (peeked ones included).
        free: How many more it may run (`max_in_flight` left, at most `claim_batch`).
        deep: Whether its last look at the queue found all it asked for (more may wait).
    """
    if deep:
        return 0
    return max(0, min(PEEK_BELOW - running, free))
