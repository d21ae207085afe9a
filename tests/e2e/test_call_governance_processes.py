"""`app.call` from three real processes passes the governance a step's handling passes.

Three processes serve the agents and each makes many calls at once (see
`support.governed_call_worker`), then the test process calls a failing
service. One test per backend checks every point, from what the handlers
recorded (never from durations):

- capacity 2: the handlings of `db.write`, as their start and end lines in one
  shared file order them, are never more than 2 at once (and do reach 2);
- 10 calls/s: no 1 s span of the store-clock times at which `api.call`'s
  handlings started holds more than 20;
- a failing service: three failed tries open its breaker (a breaker row, open),
  and the calls after it are refused at once with a `BreakerOpenError`, their
  handler never reached;
- `entity=`: each process's call got the entity's resolution, as recorded.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from shepherd.core.breaker import BreakerState
from shepherd.errors import CallFailedError
from shepherd.testing import wait_until
from support import governed_call_worker as worker
from support.files import written_lines
from support.processes import spawn_worker, workers

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

#: Seconds to wait for an outcome before failing (a backstop, not a timing claim).
PATIENCE = 60.0
NAMES = ("a", "b", "c")


def most_at_once(events: list[str]) -> int:
    """The most handlings running at once, by their `+`/`-` lines in the order written."""
    running = most = 0
    for event in events:
        running += 1 if event.startswith("+") else -1
        most = max(most, running)
    return most


def most_in_one_second(starts: list[float]) -> int:
    """The most starts in any span [t, t + 1 s)."""
    ordered = sorted(starts)
    return max(
        (sum(1 for later in ordered[i:] if later - first < 1.0) for i, first in enumerate(ordered)),
        default=0,
    )


async def test_calls_from_three_processes_are_governed_like_steps(
    shared_store: str, tmp_path: Path
) -> None:
    app = worker.build_app(shared_store, tmp_path)
    async with app:
        await app.store.move_partition(worker.PARTITION, worker.HOME)
        await app.store.assign_entity(worker.ENTITY, worker.PARTITION)
        expected = (await app.resolver.resolve(worker.ENTITY)).to_json()
        with workers() as running:
            for name in NAMES:
                running.append(
                    spawn_worker(
                        shared_store,
                        tmp_path,
                        name=name,
                        roles="agent",
                        script=Path(worker.__file__),
                        settings={"name": name, "dir": str(tmp_path)},
                    )
                )
            (tmp_path / "go").touch()
            await wait_until(
                lambda: all((tmp_path / f"{n}.json").exists() for n in NAMES),
                timeout=PATIENCE,
                message="the processes' calls were not all answered",
            )
            reports = {n: json.loads((tmp_path / f"{n}.json").read_text()) for n in NAMES}

            # The failing service: the first call's tries open the breaker.
            with pytest.raises(CallFailedError) as first:
                await app.call(worker.PAY, {"n": 0}, timeout=PATIENCE)
            reached = written_lines(tmp_path / "pay.reached")
            breaker = await app.store.get_breaker(worker.SERVICE)
            later = await asyncio.gather(
                *(app.call(worker.PAY, {"n": n}, timeout=PATIENCE) for n in range(1, 7)),
                return_exceptions=True,
            )
            for process in running:
                assert process.alive(), process.stderr()

    events = written_lines(tmp_path / "db.events")
    assert len(events) == 2 * worker.DB_CALLS * len(NAMES)
    assert most_at_once(events) == worker.CAPACITY
    assert len({e.split()[1] for e in events}) > 1, "more than one process handled db.write"

    starts = [float(line) for line in written_lines(tmp_path / "api.starts")]
    assert len(starts) == worker.API_CALLS * len(NAMES)
    assert most_in_one_second(starts) <= 2 * worker.RATE

    assert first.value.error["type"] == "BreakerOpenError"
    assert len(reached) == worker.THRESHOLD
    assert breaker is not None
    assert breaker.state is BreakerState.OPEN
    assert all(isinstance(e, CallFailedError) for e in later), later
    assert [e.error["type"] for e in later if isinstance(e, CallFailedError)] == [
        "BreakerOpenError"
    ] * 6
    assert written_lines(tmp_path / "pay.reached") == reached  # none reached the handler

    assert {n: r["where"] for n, r in reports.items()} == dict.fromkeys(NAMES, expected)
    assert all(r["answers"] == worker.DB_CALLS + worker.API_CALLS for r in reports.values())
