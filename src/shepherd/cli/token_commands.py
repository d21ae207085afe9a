"""The operators' named tokens: `shepherd tokens add NAME | list | remove NAME`.

A token opens the dashboard for its operator, whose name is then recorded
with every action they take there. The store keeps only each token's SHA-256:
`tokens add` prints the token once, and nothing can show it again (remove the
operator and add a new token instead). `--app` is optional: it only supplies
the store; each command works through its `operations`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from shepherd.cli.loader import run_with
from shepherd.cli.options import Command, app_option, json_option, operations_for, store_option
from shepherd.cli.render import age, echo_json, when
from shepherd.cli.tables import Column, echo_table, terminal_width

if TYPE_CHECKING:
    from datetime import datetime

    from shepherd.core.overview import Operator

__all__ = ["COMMANDS", "tokens"]

_COLUMNS = (Column("operator"), Column("created_at"), Column("last_used", "middle"))


@click.group()
def tokens() -> None:
    """Named operator tokens for the dashboard: add, list, remove.

    Only a hash of each token is stored; a token is shown once, when it is added.
    """


@tokens.command("add", cls=Command)
@click.argument("name", metavar="NAME")
@app_option
@store_option
@json_option
def add(name: str, app_spec: str | None, store: str | None, as_json: bool) -> None:
    """Add operator NAME and print their new token, once.

    NAME is 1 to 64 ASCII letters, digits and `._@-`, from a letter or digit.
    """
    ops = operations_for(app_spec, store, existing=True)
    token = run_with(ops, lambda: ops.add_operator(name))
    if as_json:
        echo_json({"operator": name, "token": token})
        return
    click.echo(f"operator {name}: token {token}")
    click.echo("Store it now: it will not be shown again (only its hash is kept).")


@tokens.command("list", cls=Command)
@app_option
@store_option
@json_option
def list_(app_spec: str | None, store: str | None, as_json: bool) -> None:
    """List the operators, by name, with when each token was added and last used (never the tokens)."""
    ops = operations_for(app_spec, store, existing=True)

    async def work() -> tuple[list[Operator], datetime]:
        return await ops.operators(), ops.now()

    found, now = run_with(ops, work)
    if as_json:
        echo_json(
            {
                "operators": [
                    {
                        "name": o.name,
                        "created_at": o.created_at.isoformat(),
                        "last_used_at": o.last_used_at and o.last_used_at.isoformat(),
                    }
                    for o in found
                ],
                "count": len(found),
            }
        )
        return
    if not found:
        click.echo("no operators")
        return
    rows = [
        (
            o.name,
            when(o.created_at),
            "never" if o.last_used_at is None else age(now - o.last_used_at),
        )
        for o in found
    ]
    echo_table(_COLUMNS, rows, terminal_width())
    click.echo(f"{len(found)} operator{'' if len(found) == 1 else 's'}")


@tokens.command("remove", cls=Command)
@click.argument("name", metavar="NAME")
@app_option
@store_option
@json_option
def remove(name: str, app_spec: str | None, store: str | None, as_json: bool) -> None:
    """Remove operator NAME: their token opens nothing from now on."""
    ops = operations_for(app_spec, store, existing=True)
    run_with(ops, lambda: ops.remove_operator(name))
    if as_json:
        echo_json({"removed": name})
    else:
        click.echo(f"operator {name} removed: their token no longer works")


#: The commands of this module, for the `shepherd` group.
COMMANDS = (tokens,)
