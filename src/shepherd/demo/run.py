"""The demo's orchestration: submit the orders, (maybe) crash a worker, wait, summarise.

Without `--crash` this process plays every role. With it, this process runs only
the supervisor (and submits); the scheduler and agent roles run in a worker
subprocess, which is killed with SIGKILL when a third of the orders have ended
and replaced by a fresh one. The killed worker's tasks stay `processing` until
their `complete_by` passes; then the supervisor resets them and the new worker
finishes them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import final

from rich.console import Console, Group
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from shepherd.app import App
from shepherd.core.states import TERMINAL_STATES, ProcessState
from shepherd.demo.app import (
    WORKFLOW,
    DemoOptions,
    DemoUsageError,
    build_app,
    make_order,
    open_services,
)
from shepherd.demo.summary import CrashReport, collect, render
from shepherd.demo.worker import Worker


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class DemoConfig:
    """The command line, parsed."""

    options: DemoOptions
    store: str | None = None
    keep: bool = False
    crash: bool = False
    json: bool = False
    progress: bool = True
    deadline: float = 120.0
    #: Extra options for the `--crash` worker's command line (its logging).
    worker_args: tuple[str, ...] = ()


@final
class ProgressView:
    """A live bar of ended orders on stderr (display only: nothing waits on it)."""

    def __init__(self, total: int, *, enabled: bool) -> None:
        self.progress = Progress(
            TextColumn("[bold]orders ended"),
            BarColumn(bar_width=None),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
        )
        self.task = self.progress.add_task("orders", total=total)
        self.live = Live(console=Console(stderr=True), refresh_per_second=8) if enabled else None

    def show(self, counts: dict[ProcessState, int], note: str) -> None:
        """Show the latest counts, and `note` below them."""
        if self.live is None:
            return
        self.progress.update(self.task, completed=sum(counts.get(s, 0) for s in TERMINAL_STATES))
        busy = sum(counts.get(s, 0) for s in ProcessState if s not in TERMINAL_STATES)
        detail = (
            f"[green]processed {counts.get(ProcessState.PROCESSED, 0)}[/]  "
            f"[yellow]compensated {counts.get(ProcessState.COMPENSATED, 0)}[/]  "
            f"[red]error {counts.get(ProcessState.ERROR, 0)}[/]  not ended {busy}"
        )
        lines: list[Progress | Text] = [self.progress, Text.from_markup(detail)]
        if note:
            lines.append(Text(note, style="yellow"))
        self.live.update(Group(*lines))

    def __enter__(self) -> ProgressView:
        if self.live is not None:
            self.live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.stop()
            if not self.live.console.is_terminal:
                # Rich ends its last frame with a newline only on a terminal: end the
                # line here, or a pipe gets the next output glued to it.
                self.live.console.line()


@contextlib.asynccontextmanager
async def workdir(keep: bool) -> AsyncIterator[Path]:
    """A fresh temporary directory, deleted at the end unless `keep`."""
    path = Path(tempfile.mkdtemp(prefix="shepherd-demo-"))
    try:
        yield path
    finally:
        if not keep:
            shutil.rmtree(path, ignore_errors=True)


async def run_demo(config: DemoConfig, console: Console) -> bool:
    """Run the demo end to end and print its summary; return whether every order ended."""
    async with workdir(config.keep) as tmp:
        store = config.store or f"sqlite:///{tmp / 'shepherd.db'}"
        options = replace(config.options, services=str(tmp / "services.db"))
        services = open_services(options)
        app = build_app(store, options, services)
        try:
            with _log_to(tmp / "demo.log"):
                async with app:
                    summary = await _drive(app, store, options, config, tmp)
        finally:
            services.ledger.close()
        if config.keep:
            summary["kept"] = {"store": store, "directory": str(tmp)}
        if config.json:
            print(json.dumps(summary, indent=2))
        else:
            render(summary, console)
            if config.keep:
                console.print(f"Kept the store {store} and the services' ledger and logs in {tmp}")
        if not summary["all_terminal"]:
            print(
                f"error: not every order ended within the {config.deadline:g} s deadline: "
                f"{summary['terminal']} of {options.orders} did",
                file=sys.stderr,
            )
            return False
        return True


async def _drive(
    app: App, store: str, options: DemoOptions, config: DemoConfig, tmp: Path
) -> dict[str, object]:
    if sum((await app.store.count_tasks()).values()):
        raise DemoUsageError(f"the store {store} already holds tasks; give the demo an empty one")
    started = time.monotonic()
    roles = ("supervisor",) if config.crash else ("scheduler", "agent", "supervisor")
    worker: Worker | None = None
    crash: CrashReport | None = None
    try:
        async with app.running(roles):
            await asyncio.gather(
                *(app.submit(WORKFLOW, make_order(n, options.seed), key=f"order-{n}")
                  for n in range(1, options.orders + 1))
            )  # fmt: skip
            if config.crash:
                worker = await Worker.start(
                    store, replace(options, generation=1), tmp, config.worker_args
                )
            deadline = started + config.deadline
            note = ""
            with ProgressView(options.orders, enabled=config.progress) as view:
                while True:
                    counts = await app.store.count_tasks()
                    terminal = sum(counts.get(s, 0) for s in TERMINAL_STATES)
                    view.show(counts, note)
                    if terminal >= options.orders or time.monotonic() > deadline:
                        break
                    if worker is not None:
                        worker.check()
                        if crash is None and terminal >= options.orders / 3:
                            crash = CrashReport(pid=worker.proc.pid, terminal_at_kill=terminal)
                            await worker.stop(signal.SIGKILL)
                            note = (
                                f"worker {crash.pid} killed (SIGKILL) after {terminal} orders ended"
                            )
                            view.show(counts, note + "; starting a new worker")
                            worker = await Worker.start(
                                store, replace(options, generation=2), tmp, config.worker_args
                            )
                            note += f"; worker {worker.proc.pid} took over"
                    await asyncio.sleep(0.05 if config.crash else 0.2)
            elapsed = time.monotonic() - started
    finally:
        if worker is not None:
            await worker.stop()
    return await collect(app, options, elapsed=elapsed, crash=crash)


@contextlib.contextmanager
def _log_to(path: Path) -> Iterator[None]:
    """Send the logs to a file for the block, so they do not tear the progress bar.

    The levels stay as the command line set them; only where records go changes.
    """
    root = logging.getLogger()
    handlers = root.handlers[:]
    handler = logging.FileHandler(path)
    # The lines look like those of the stderr handler they stand in for (the workers' logs).
    formatter = next((h.formatter for h in handlers if h.formatter is not None), None)
    handler.setFormatter(
        formatter or logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    )
    root.handlers[:] = [handler]
    try:
        yield
    finally:
        root.handlers[:] = handlers
        handler.close()
