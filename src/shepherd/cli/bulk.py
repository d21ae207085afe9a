"""What the CLI's bulk actions share: `retry --all-matching`, `alerts ack --task | --all-matching`.

The ids are fixed first (the tasks a filter matches now, at most
`MAX_BULK`); `--dry-run` prints them and changes nothing; otherwise, unless
`--yes`, the command asks on the terminal, saying how many, then acts on
exactly those ids in one store write and prints what it did: how many were
done, and each refused task with why (its state changed meanwhile).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar, final

import click

from shepherd.cli.loader import run_with
from shepherd.cli.options import duration_option
from shepherd.cli.render import echo_json
from shepherd.core.bulk import MAX_BULK, BulkAction, BulkOutcome
from shepherd.errors import ConfigError

if TYPE_CHECKING:
    from shepherd.core.records import JsonValue
    from shepherd.operations import Operations

__all__ = ["BulkRun", "all_matching_options", "print_outcome", "run_bulk", "since_bound"]

F = TypeVar("F", bound=Callable[..., Any])

#: Task ids a dry run lists (the rest are counted; `--json` lists them all).
SHOWN = 20
_VERB = {BulkAction.RETRY: "retry", BulkAction.ACKNOWLEDGE: "acknowledge the alerts of"}
_DONE = {BulkAction.RETRY: "retried", BulkAction.ACKNOWLEDGE: "acknowledged the alerts of"}


def all_matching_options(fn: F) -> F:
    """`--all-matching`, `--since`, `--dry-run` and `--yes`."""
    for option in reversed(
        (
            click.option(
                "--all-matching",
                is_flag=True,
                help="Act on every task the filters match (at most 10,000), not on one TASK.",
            ),
            click.option(
                "--since",
                callback=duration_option,
                metavar="DURATION",
                help="With --all-matching: only tasks changed within this long (30s, 15m, 1h, 2d).",
            ),
            click.option(
                "--dry-run", is_flag=True, help="Print the tasks it would act on; change nothing."
            ),
            click.option("--yes", is_flag=True, help="Do not ask for confirmation."),
        )
    ):
        fn = option(fn)
    return fn


def since_bound(ops: Operations, since: timedelta | None) -> datetime | None:
    """The instant `since` ago on the store's clock (None: no bound)."""
    if since is None:
        return None
    try:
        return ops.now() - since
    except OverflowError:  # further back than datetime goes: no bound
        return None


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class BulkRun:
    """One bulk command: what it does, by whom, its tasks in words, and whether it asks first."""

    ops: Operations
    action: BulkAction
    what: str
    by: str
    dry_run: bool = False
    yes: bool = True


def run_bulk(run: BulkRun, pick: Callable[[], Awaitable[list[str]]], *, as_json: bool) -> None:
    """Fix the ids `pick` gives, then act on them as `run` says (see the module's docstring).

    Raises:
        ConfigError: More than MAX_BULK tasks match (nothing is done).
        click.Abort: The operator did not confirm.
    """
    ops = run.ops

    async def work() -> tuple[list[str], BulkOutcome | None]:
        ids = list(dict.fromkeys(await pick()))
        if len(ids) > MAX_BULK:
            raise ConfigError(
                "--all-matching",
                f"more than {MAX_BULK:,} tasks match: a bulk action takes at most {MAX_BULK:,}; "
                "narrow it (--workflow, --since)",
            )
        if run.dry_run or not ids:
            return ids, None
        if not run.yes:
            plural = "" if len(ids) == 1 else "s"
            question = f"{_VERB[run.action].capitalize()} {len(ids):,} task{plural} ({run.what})?"
            click.confirm(question, abort=True, err=True)
        if run.action is BulkAction.RETRY:
            return ids, await ops.retry_many(ids, by=run.by)
        return ids, await ops.acknowledge_alerts_of(ids, by=run.by)

    ids, outcome = run_with(ops, work)
    if outcome is None:
        _print_untouched(run, ids, as_json=as_json)
    else:
        print_outcome(outcome, by=run.by, as_json=as_json)


def _print_untouched(run: BulkRun, ids: list[str], *, as_json: bool) -> None:
    """A dry run's tasks, or that no task matched."""
    if as_json:
        document: JsonValue = {
            "action": run.action.value,
            "dry_run": run.dry_run,
            "of": len(ids),
            "task_ids": list(ids),
        }
        echo_json(document)
        return
    if not ids:
        click.echo(f"no task matches ({run.what}): nothing to do")
        return
    plural = "" if len(ids) == 1 else "s"
    click.echo(f"would {_VERB[run.action]} {len(ids):,} task{plural} ({run.what}):")
    for task_id in ids[:SHOWN]:
        click.echo(f"  {task_id}")
    if len(ids) > SHOWN:
        click.echo(f"  and {len(ids) - SHOWN:,} more (--json lists them all)")


def print_outcome(outcome: BulkOutcome, *, by: str, as_json: bool) -> None:
    """What a bulk action did: how many done and refused, each refused task with why."""
    if as_json:
        echo_json(outcome.to_json())
        return
    alerts = (
        f"{outcome.alerts} alert{'' if outcome.alerts == 1 else 's'}; "
        if outcome.action is BulkAction.ACKNOWLEDGE
        else ""
    )
    plural = "" if outcome.of == 1 else "s"
    click.echo(
        f"{_DONE[outcome.action]} {len(outcome.done):,} of {outcome.of:,} task{plural} "
        f"({alerts}bulk action {outcome.bulk}, by {by})"
    )
    if outcome.refused:
        click.echo(f"refused {len(outcome.refused):,}:")
        for refusal in outcome.refused:
            click.echo(f"  {refusal.task_id}  {refusal.reason}")
