"""`shepherd signal TASK NAME JSON`: send a signal to a task, through `app.operations` only.

The signal is recorded in the task's history and consumed by the task's
first `ctx.wait_for(NAME)`, whether the task waits already or not yet. The
signals a task received are listed by `shepherd show` (`cli.signal_rows`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from shepherd.cli import render
from shepherd.cli.loader import parse_json_argument, run_with
from shepherd.cli.lookup import find_task_id
from shepherd.cli.options import Command, app_option, json_option, operations_for, store_option
from shepherd.cli.task_commands import by_option

if TYPE_CHECKING:
    from shepherd.core.signalling import Sent

__all__ = ["COMMANDS", "signal"]


@click.command(cls=Command)
@click.argument("name", metavar="TASK")
@click.argument("signal_name", metavar="NAME")
@click.argument("payload", metavar="JSON", required=False)
@click.option("--workflow", metavar="NAME", help="Look TASK up as a key of this workflow only.")
@click.option(
    "--idempotency-key",
    metavar="KEY",
    help="Send at most once: the same key again for the task is the same signal.",
)
@by_option
@app_option
@store_option
@json_option
def signal(
    name: str,
    signal_name: str,
    payload: str | None,
    workflow: str | None,
    idempotency_key: str | None,
    by: str,
    app_spec: str | None,
    store: str | None,
    as_json: bool,
) -> None:
    """Send signal NAME with the JSON payload (default null; `-` reads stdin) to TASK.

    TASK is a task id, an id prefix or a business key. A task that ended is refused.
    """
    body = parse_json_argument(payload, "JSON")
    ops = operations_for(app_spec, store, existing=True)

    async def work() -> Sent:
        task_id = await find_task_id(ops, name, workflow=workflow)
        return await ops.signals.send(
            task_id, signal_name, body, idempotency_key=idempotency_key, by=by
        )

    sent = run_with(ops, work)
    if as_json:
        render.echo_json(
            {
                "id": sent.id,
                "task_id": sent.task_id,
                "duplicate": sent.duplicate,
                "delivered": sent.delivered,
            }
        )
        return
    if sent.duplicate:
        told = "already sent with that idempotency key: nothing new stored"
    elif sent.delivered:
        told = "delivered to its waiting step"
    else:
        told = "stored for its next wait of that name"
    click.echo(f"signal {sent.id} to task {sent.task_id}: {told}")


#: The commands of this module, for the `shepherd` group.
COMMANDS = (signal,)
