"""A `shepherd run` worker in a process of its own, for the workloads whose client is apart (W4, W6, lone).

The worker runs every role of the bench app (`shepherd.bench.apart_app`) with
the client's settings, passed as `SHEPHERD_*` variables. It is SIGTERMed and
reaped on the way out whatever ends the workload (its end, an error, Ctrl-C),
and SIGKILLed if it does not stop in time. While the client waits for results,
`unless_exits` stops the wait as soon as the worker dies, so a dead worker
shows as lost tasks at once rather than at the workload's deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shepherd.bench.apart_app import APP
from shepherd.bench.crash import Worker
from shepherd.errors import RoleStoppedError

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Coroutine

#: Seconds the worker may take to print `shepherd ready:`.
READY_WITHIN = 60.0


def worker_env(store: str, settings: dict[str, Any]) -> dict[str, str]:
    """The worker's environment: ours, with the client's store and settings as `SHEPHERD_*`."""
    return {
        **os.environ,
        **{f"SHEPHERD_{name.upper()}": str(value) for name, value in settings.items()},
        "SHEPHERD_STORE": store,
    }


def _tail(path: Path) -> str:
    """The last line the worker wrote to stderr, to say why it did not start."""
    try:
        lines = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "no output"
    return lines[-1] if lines else "no output"


@asynccontextmanager
async def worker_apart(
    store: str, settings: dict[str, Any], *, stderr: Path
) -> AsyncIterator[Worker]:
    """Start `shepherd run` on `store` and wait until it is ready; stop it on the way out.

    `Worker.snapshot` reads its store's counters (written next to `stderr`).

    Raises:
        RoleStoppedError: The worker did not print its readiness line within
            READY_WITHIN s; the message quotes its last line on stderr.
    """
    try:
        worker = await Worker.start(
            ["run", "--app", APP, "--log-level", "warning"],
            stderr=stderr,
            ready_within=READY_WITHIN,
            module="shepherd",
            ready=b"shepherd ready:",
            env=worker_env(store, settings),
            stats_file=stderr.with_suffix(".stats.json"),
        )
    except RuntimeError:
        raise RoleStoppedError(
            f"the bench's worker (shepherd run --app {APP}) did not start within "
            f"{READY_WITHIN:g} s: {_tail(stderr)}"
        ) from None
    try:
        yield worker
    finally:
        await worker.stop()


async def unless_ended(watched: asyncio.Future[Any], work: Coroutine[Any, Any, object]) -> bool:
    """Await `work`, unless `watched` ends first (then `work` is cancelled); whether it ended.

    `watched` is left as it is (the roles of an in-process run, a worker's exit).
    """
    job = asyncio.ensure_future(work)
    try:
        await asyncio.wait({job, watched}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not job.done():
            job.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await job
    if job.cancelled():
        return False
    job.result()  # re-raises what ended it
    return True


async def unless_exits(worker: Worker, work: Coroutine[Any, Any, object]) -> bool:
    """Await `work`, unless the worker exits first (then `work` is cancelled); whether it ended."""
    exited = asyncio.ensure_future(worker.proc.wait())
    try:
        return await unless_ended(exited, work)
    finally:
        exited.cancel()


def complain(
    workload: str,
    *,
    lost: int,
    submitted: int,
    exit_code: int | None = None,
    stderr: Path | None = None,
) -> None:
    """Say on stderr what went wrong: tasks not processed in time, a worker that died."""
    if exit_code is not None and stderr is not None:
        print(
            f"{workload}: the worker exited with {exit_code} before the end: {_tail(stderr)}",
            file=sys.stderr,
        )
    if lost:
        print(
            f"{workload}: {lost} of {submitted} acknowledged workflows were not processed in time",
            file=sys.stderr,
        )


def cpu_seconds(pid: int) -> float | None:
    """User plus system CPU time of process `pid` (every thread), from `/proc/PID/stat`."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Fields after the command name, which is in parentheses and may hold spaces:
    # state is field 3, utime field 14, stime field 15.
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def idle_cpu(worker: Worker, seconds: float) -> float | None:
    """The worker's CPU use while nothing is submitted for `seconds` s, as a fraction of one core.

    None without `/proc`. The resolution is one clock tick (usually 10 ms) over
    the whole interval.
    """
    before, began = cpu_seconds(worker.proc.pid), time.monotonic()
    await asyncio.sleep(seconds)  # the measurement itself: the worker is left alone this long
    after, ended = cpu_seconds(worker.proc.pid), time.monotonic()
    if before is None or after is None:
        return None
    return (after - before) / (ended - began)


__all__ = [
    "complain",
    "cpu_seconds",
    "idle_cpu",
    "unless_ended",
    "unless_exits",
    "worker_apart",
    "worker_env",
]
