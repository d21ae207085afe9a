"""`app.call` across real processes: a handler's process SIGKILLed mid-call, another answers.

Two agent processes serve `calls.hang`, whose first handling of a call hangs.
The test calls it, SIGKILLs whichever process took the call, and awaits the
answer: the surviving process takes the call once its handling's window has
passed and answers, and the caller gets that one answer.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from shepherd.testing import wait_until
from support import call_worker
from support.call_worker import AGENT, build_app
from support.files import written_lines
from support.processes import spawn_worker, workers

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

#: Seconds to wait for an outcome before failing (a backstop, not a timing claim).
PATIENCE = 60.0
CALL_WORKER = Path(call_worker.__file__)


def handlings(log: Path) -> list[tuple[str, int]]:
    """(worker, attempt) of every handling logged so far."""
    return [(w, int(a)) for w, a in (line.split() for line in written_lines(log))]


async def test_a_call_whose_handler_was_killed_is_answered_by_another_process(
    shared_store: str, tmp_path: Path
) -> None:
    log = tmp_path / "handlings.log"
    app = build_app(shared_store)
    async with app:
        with workers() as running:
            for name in ("a", "b"):
                running.append(
                    spawn_worker(
                        shared_store,
                        tmp_path,
                        name=name,
                        roles="agent",
                        script=CALL_WORKER,
                        log_path=log,
                        settings={"name": name},
                    )
                )
            answer = asyncio.create_task(app.call(AGENT, {"n": 1}, within=1.0, timeout=PATIENCE))
            await wait_until(lambda: bool(handlings(log)), timeout=PATIENCE, message="not taken")
            ((first, attempt),) = handlings(log)
            assert attempt == 1
            victim = next(w for w in running if w.name == first)
            victim.kill()

            result = await answer

    survivor = "b" if first == "a" else "a"
    assert result == {"by": survivor, "attempt": 2}
    assert handlings(log) == [(first, 1), (survivor, 2)]
