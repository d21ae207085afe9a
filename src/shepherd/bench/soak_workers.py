"""The soak's worker processes, kept running the way a service manager keeps a service.

Each slot runs `python -m shepherd run --app shepherd.bench.soak_app:app` (every
role). `kill` SIGKILLs a slot's process and starts its replacement at once; a
process that exits on its own is counted and replaced too; a start that fails
(the store is down while PostgreSQL restarts) is retried after a pause. Every
process writes its own execution log, so nothing of a killed one is lost.
Each process is asked for its store's commits just before it is killed or
stopped (`shepherd.bench.counts`); one that exits on its own takes its count along.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, final

from shepherd.bench.counts import commits
from shepherd.bench.crash import Worker
from shepherd.bench.soak_app import EXEC_LOG_ENV
from shepherd.bench.soak_probe import rss_kib

if TYPE_CHECKING:
    from collections.abc import Mapping

APP = "shepherd.bench.soak_app:app"
#: Seconds between two tries to start a process whose start failed.
START_PAUSE = 1.0
#: Seconds a process may take to print its readiness line.
READY_WITHIN = 60.0
#: Failed starts in a row after which the soak gives up.
MAX_FAILED_STARTS = 30


@dataclass(frozen=True, slots=True, kw_only=True)
class Kill:
    """One SIGKILL: when (s since the soak began), which process, how old and how big it was."""

    at_s: float
    slot: int
    pid: int
    uptime_s: float
    rss_kib: int | None


@dataclass(slots=True)
class _Slot:
    worker: Worker
    started: float
    killing: bool = False


@final
@dataclass(slots=True)
class WorkerPool:
    """`size` worker processes on one store, with their logs under `workdir`."""

    env: Mapping[str, str]
    workdir: Path
    started: float
    size: int = 2
    slots: list[_Slot] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)
    kills: list[Kill] = field(default_factory=list)
    failed_starts: int = 0
    unexpected_exits: int = 0
    #: The store commits of the processes killed or stopped so far, each told just before.
    commits: float = 0.0
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def start(self) -> None:
        """Start every slot's first process."""
        for _ in range(self.size):
            self.slots.append(await self._spawn())

    async def _spawn(self) -> _Slot:
        """Start one process, retrying while it fails to become ready."""
        failed_in_a_row = 0
        while True:
            log = self.workdir / f"soak-exec-{len(self.logs) + 1}.log"
            self.logs.append(log)
            try:
                worker = await Worker.start(
                    ["run", "--app", APP, "--log-level", "info"],
                    stderr=self.workdir / "soak-workers.stderr",
                    ready_within=READY_WITHIN,
                    module="shepherd",
                    ready=b"shepherd ready:",
                    env={**self.env, EXEC_LOG_ENV: str(log)},
                    stats_file=log.with_suffix(".stats.json"),
                )
            except RuntimeError:
                self.failed_starts += 1
                failed_in_a_row += 1
                if failed_in_a_row >= MAX_FAILED_STARTS:
                    raise
                await asyncio.sleep(START_PAUSE)
                continue
            return _Slot(worker, time.monotonic())

    async def kill(self, slot: int) -> Kill:
        """SIGKILL slot `slot`'s process and start its replacement at once."""
        async with self._lock:
            current = self.slots[slot]
            current.killing = True
            pid = current.worker.proc.pid
            rss = rss_kib(pid)
            self.commits += commits(await current.worker.snapshot())
            now = time.monotonic()
            await current.worker.kill()
            kill = Kill(
                at_s=now - self.started,
                slot=slot,
                pid=pid,
                uptime_s=now - current.started,
                rss_kib=rss,
            )
            self.kills.append(kill)
            self.slots[slot] = await self._spawn()
            return kill

    async def watch(self, *, every: float = 0.5) -> None:
        """Replace any process that exits on its own (until cancelled)."""
        while True:
            await asyncio.sleep(every)
            async with self._lock:
                for i, slot in enumerate(self.slots):
                    if slot.worker.proc.returncode is not None and not slot.killing:
                        self.unexpected_exits += 1
                        self.slots[i] = await self._spawn()

    def rss(self) -> list[int | None]:
        """Each slot's current process's RSS in KiB."""
        return [rss_kib(s.worker.proc.pid) for s in self.slots]

    def uptimes(self) -> list[float]:
        """Seconds each slot's current process has run."""
        now = time.monotonic()
        return [now - s.started for s in self.slots]

    async def stop(self) -> None:
        """SIGTERM every process (SIGKILL after 15 s)."""
        for slot in self.slots:
            slot.killing = True
            self.commits += commits(await slot.worker.snapshot())
            with contextlib.suppress(ProcessLookupError):
                await slot.worker.stop()
            await slot.worker.kill()


__all__ = ["Kill", "WorkerPool"]
