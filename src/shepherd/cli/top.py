"""`shepherd top`: a live view of the store for operators who live in a terminal.

It redraws one frame (`top_view`) every `--interval` seconds until Ctrl-C;
`--once` prints one frame and exits, for scripts and tests. Like the other
operator commands, `--app` only supplies the store and the settings.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

import click
from rich.console import Console
from rich.live import Live

from shepherd.cli.loader import run_with
from shepherd.cli.options import Command, app_option, operations_for, store_option
from shepherd.cli.top_view import Rates, read_frame, render

__all__ = ["COMMANDS", "top"]


@click.command(cls=Command)
@app_option
@click.option(
    "--interval",
    type=click.FloatRange(min=0.1),
    default=2.0,
    show_default=True,
    metavar="SECONDS",
    help="Seconds between two frames.",
)
@click.option("--once", is_flag=True, help="Print one frame and exit (for scripts).")
@click.option(
    "--failures",
    type=click.IntRange(min=1, max=100),
    default=5,
    show_default=True,
    metavar="N",
    help="How many of the newest tasks in error to show.",
)
@store_option
def top(
    app_spec: str | None, interval: float, once: bool, failures: int, store: str | None
) -> None:
    """Watch the store live: tasks per state, throughput, recent failures, breakers.

    Every --interval seconds it reads the tasks per process_state, the tasks
    that ended over the last minute (and per second since the previous
    frame), the newest tasks in error with their reason and whether their
    alert is open, the circuit breakers, the live workers and the supervisor
    leader. Ctrl-C quits.
    """
    ops = operations_for(app_spec, store, existing=True)
    console = Console()

    async def once_only() -> None:
        await ops.open()
        console.print(render(await read_frame(ops, failures=failures), rate=None, interval=None))

    async def live() -> None:
        await ops.open()
        rates = Rates()
        frame = await read_frame(ops, failures=failures)
        rates.add(frame, monotonic=time.monotonic())
        view = render(frame, rate=None, interval=interval)
        with Live(view, console=console, auto_refresh=False) as screen:
            while True:
                await asyncio.sleep(interval)  # the refresh period, not a synchronisation
                frame = await read_frame(ops, failures=failures)
                rate = rates.add(frame, monotonic=time.monotonic())
                screen.update(render(frame, rate=rate, interval=interval), refresh=True)

    if once:
        run_with(ops, once_only)
        return
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C leaves a live view: not an error
        run_with(ops, live)


#: The commands of this module, for the `shepherd` group.
COMMANDS = (top,)
