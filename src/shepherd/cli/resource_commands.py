"""The operator's resource governance commands: `shepherd resources ...` and `shepherd partitions ...`.

`--app` is optional here: it supplies the store and the settings (and creates
the resources it declares, as opening it always does); each command works
through its `operations`. Every change is checked
before anything is written: a bad value is exit code 2 with a message naming
the resource, partition or entity, and the store is left as it was. Each
change moves the resolver's version, and every process drops its cached
resolutions at once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import click

from shepherd.cli.loader import parse_json_argument, run_with
from shepherd.cli.options import Command, app_option, json_option, operations_for, store_option
from shepherd.cli.render import compact, echo_json
from shepherd.cli.tables import Column, echo_table, terminal_width
from shepherd.console.exits import ExitCode
from shepherd.core.resources import KEEP, Keep, Resource, ResourceChange
from shepherd.errors import InvalidResourceError

if TYPE_CHECKING:
    from shepherd.core.moves import PartitionMove
    from shepherd.core.records import JsonValue
    from shepherd.operations import Operations

__all__ = ["COMMANDS", "partitions", "resources"]

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")

_RESOURCE_COLUMNS = (
    Column("resource"),
    Column("kind", "middle", drop=1),
    Column("capacity", right=True),
    Column("rate", right=True),
    Column("info", "wide"),
)
_PARTITION_COLUMNS = (Column("partition"), Column("resource"), Column("entities", right=True))


def _limit(kind: type[int] | type[float], what: str) -> Callable[..., int | float | Keep | None]:
    """A click callback: `none` -> None (no limit), a number -> itself, absent -> KEEP."""

    def parse(
        _ctx: click.Context, _param: click.Parameter, text: str | None
    ) -> int | float | Keep | None:
        if text is None:
            return KEEP
        if text.strip().lower() == "none":
            return None
        try:
            return kind(text)
        except ValueError:
            raise click.BadParameter(f"{text!r} is not {what} or 'none'") from None

    return parse


def _limits(fn: F) -> F:
    fn = click.option(
        "--rate",
        callback=_limit(float, "a number of calls per second"),
        metavar="R|none",
        help="Calls per second shared by every process; 'none': no limit.",
    )(fn)
    return click.option(
        "--capacity",
        callback=_limit(int, "a whole number"),
        metavar="N|none",
        help="Most handlers using it at once, cluster-wide; 'none': no cap.",
    )(fn)


def _store_options(fn: F) -> F:
    """`--app`, `--store` and `--json`, as every command here takes them."""
    return app_option(store_option(json_option(fn)))


def _info(name: str, text: str | None) -> dict[str, JsonValue] | Keep:
    """`--info JSON` as a JSON object, or KEEP when absent; refused before anything is written."""
    if text is None:
        return KEEP
    info = parse_json_argument(text, f"--info of resource {name!r}")
    if not isinstance(info, dict):
        raise InvalidResourceError(
            f"resource {name!r}", "info", f"--info must be a JSON object, not {compact(info)}"
        )
    return info


def _run(
    app_spec: str | None,
    store: str | None,
    work: Callable[[Operations], Awaitable[T]],
    *,
    existing: bool,
) -> T:
    ops = operations_for(app_spec, store, existing=existing)

    async def go() -> T:
        await ops.open()
        return await work(ops)

    return run_with(ops, go)


def _fixed(value: object) -> object:
    """A limit as the CLI shows it: None is no limit."""
    return "-" if value is None else f"{value:g}" if isinstance(value, float) else value


def _describe(resource: Resource) -> str:
    limits = []
    if resource.capacity is not None:
        limits.append(f"capacity {resource.capacity}")
    if resource.rate is not None:
        limits.append(f"rate {resource.rate:g}/s")
    return f"{resource.name!r} ({', '.join([resource.kind, *limits])})"


def _echo_done(done: str, resource: Resource, as_json: bool) -> None:
    """Say what was `done` ("added", "changed", "removed") to `resource`."""
    if as_json:
        echo_json({done: resource.to_json()})
    else:
        click.echo(f"{done} resource {_describe(resource)}")


def _list_command(
    group: click.Group,
    what: str,
    read: Callable[[Operations], Awaitable[Sequence[T]]],
    *,
    help_text: str,
    columns: Sequence[Column],
    row: Callable[[T], tuple[str, ...]],
    to_json: Callable[[T], JsonValue],
) -> click.Command:
    """`shepherd GROUP list`: every one of `what` as a table, or as JSON with the resolver's version."""

    @group.command("list", cls=Command, help=help_text)
    @_store_options
    def list_(app_spec: str | None, store: str | None, as_json: bool) -> None:
        async def work(ops: Operations) -> tuple[Sequence[T], int]:
            version = await ops.resolver_version()
            return await read(ops), version

        found, version = _run(app_spec, store, work, existing=True)
        if as_json:
            echo_json({what: [to_json(one) for one in found], "version": version})
        elif not found:
            click.echo(f"no {what}")
        else:
            echo_table(columns, [row(one) for one in found], terminal_width())

    return list_


# -- shepherd resources ---------------------------------------------------------
@click.group(short_help="Add, change, list and remove the resources agents call.")
def resources() -> None:
    """Resources agents call (a database, a rate-limited API): add, set, list, remove.

    A resource has a kind, connection details (--info, a JSON object: no
    secrets, it is listed), and optionally a capacity and a rate, shared by
    every process through the store.
    """


#: A command's change: (NAME, the fields given) -> what it does through the operations.
_Change = Callable[[str, ResourceChange], Callable[["Operations"], Awaitable[Resource]]]


def _resource_command(
    command: str, *, done: str, existing: bool, kind_required: bool, kind_help: str, info_help: str
) -> Callable[[_Change], click.Command]:
    """`shepherd resources COMMAND NAME` with the resource's fields as options.

    The decorated function gets NAME and the fields given as a `ResourceChange`
    (`--info` checked first), and returns what to do with the operations; the command
    runs it and says what was `done` to the resource.
    """

    def make(
        body: _Change,
    ) -> click.Command:
        @resources.command(command, cls=Command, help=body.__doc__)
        @click.argument("name")
        @click.option("--kind", required=kind_required, help=kind_help)
        @click.option("--info", "info_text", metavar="JSON", help=info_help)
        @_limits
        @_store_options
        def run(
            name: str,
            kind: str | None,
            info_text: str | None,
            capacity: int | Keep | None,
            rate: float | Keep | None,
            app_spec: str | None,
            store: str | None,
            as_json: bool,
        ) -> None:
            info = _info(name, info_text)
            change = ResourceChange(
                kind=KEEP if kind is None else kind, info=info, capacity=capacity, rate=rate
            )
            work = body(name, change)
            _echo_done(done, _run(app_spec, store, work, existing=existing), as_json)

        return run

    return make


@_resource_command(
    "add",
    done="added",
    existing=False,
    kind_required=True,
    kind_help="What it is (sqlite, postgres, http...).",
    info_help="Connection details, a JSON object.",
)
def add(name: str, fields: ResourceChange) -> Callable[[Operations], Awaitable[Resource]]:
    """Add resource NAME (an error if it exists: change it with `resources set`)."""
    resource = fields.applied_to(Resource(name=name, kind="", info={}))
    return lambda ops: ops.add_resource(resource)


@_resource_command(
    "set",
    done="changed",
    existing=True,
    kind_required=False,
    kind_help="A new kind.",
    info_help="New connection details (replaced whole).",
)
def set_(name: str, change: ResourceChange) -> Callable[[Operations], Awaitable[Resource]]:
    """Change resource NAME: only the fields given ('none' removes a capacity or a rate)."""
    if change.is_empty():
        raise click.UsageError(
            "nothing to change: give --kind, --info, --capacity or --rate",
            click.get_current_context(),
        )
    return lambda ops: ops.set_resource(name, change)


list_resources = _list_command(
    resources,
    "resources",
    lambda ops: ops.resources(),
    help_text="List every resource, with its limits and connection details.",
    columns=_RESOURCE_COLUMNS,
    row=lambda r: (r.name, r.kind, str(_fixed(r.capacity)), str(_fixed(r.rate)), compact(r.info)),
    to_json=Resource.to_json,
)


@resources.command("remove", cls=Command)
@click.argument("name")
@_store_options
def remove(name: str, app_spec: str | None, store: str | None, as_json: bool) -> None:
    """Remove resource NAME (an error while partitions live on it)."""
    removed = _run(app_spec, store, lambda ops: ops.remove_resource(name), existing=True)
    _echo_done("removed", removed, as_json)


# -- shepherd partitions --------------------------------------------------------
@click.group(short_help="Put partitions on resources, and entities in partitions.")
def partitions() -> None:
    """Partitions and the entities in them: entity -> partition -> resource.

    Moving a partition moves every entity in it; each process drops its cached
    resolutions when the mapping changes, and calls that start afterwards use
    the new resource.
    """


@partitions.command("assign", cls=Command)
@click.argument("entity")
@click.argument("partition")
@_store_options
def assign(
    entity: str, partition: str, app_spec: str | None, store: str | None, as_json: bool
) -> None:
    """Put ENTITY in PARTITION (which must exist: `partitions move` creates one)."""
    before = _run(app_spec, store, lambda ops: ops.assign_entity(entity, partition), existing=False)
    if as_json:
        echo_json({"entity": entity, "partition": partition, "previous": before})
    elif before is None:
        click.echo(f"entity {entity!r} assigned to partition {partition!r}")
    else:
        click.echo(f"entity {entity!r} moved from partition {before!r} to {partition!r}")


@partitions.command("move", cls=Command)
@click.argument("partition")
@click.argument("resource")
@click.option(
    "--timeout",
    type=float,
    metavar="SECONDS",
    help="Wait at most this long for the steps in flight, then move anyway (exit code 5).",
)
@click.option("--now", is_flag=True, help="Move at once; say which steps were still in flight.")
@_store_options
def move(
    partition: str,
    resource: str,
    timeout: float | None,
    now: bool,
    app_spec: str | None,
    store: str | None,
    as_json: bool,
) -> None:
    """Put PARTITION on RESOURCE once its steps in flight have ended (creating it if new).

    Steps that would start for its entities meanwhile wait (neither failed nor
    charged), so one task's steps for one entity never run on two resources at
    once. With --now, or after --timeout, it moves while steps still run on
    the old resource: they are listed, and keep the resource they were sent to.
    """
    done = _run(
        app_spec,
        store,
        lambda ops: ops.drain_and_move_partition(partition, resource, timeout=timeout, now=now),
        existing=False,
    )
    if as_json:
        echo_json(done.to_json())
    else:
        _echo_move(done)
    if done.timed_out and done.in_flight:
        click.get_current_context().exit(int(ExitCode.TIMEOUT))


def _echo_move(done: PartitionMove) -> None:
    moved, before = done.partition, done.previous
    if before is None:
        click.echo(f"partition {moved.name!r} created on resource {moved.resource!r}")
        return
    if before == moved.resource:
        click.echo(f"partition {moved.name!r} is on resource {moved.resource!r} already")
        return
    entities = f"{moved.entities} entit{'y' if moved.entities == 1 else 'ies'}"
    after = ""
    if done.waited_for:
        after = f", after {_steps(done.waited_for)} in flight on {before!r} ended"
    if done.timed_out:
        after = ", after the timeout"
    click.echo(
        f"partition {moved.name!r} moved from resource {before!r} to {moved.resource!r} "
        f"({entities}{after})"
    )
    if done.in_flight:
        click.echo(
            f"{_steps(len(done.in_flight))} still in flight on {before!r} "
            "(they keep the resource they were sent to):"
        )
        for step in done.in_flight:
            click.echo(
                f"  task {step.task_id} step {step.seq} ({step.agent}, attempt {step.attempt})"
            )


def _steps(count: int) -> str:
    return f"{count} step{'' if count == 1 else 's'}"


list_partitions = _list_command(
    partitions,
    "partitions",
    lambda ops: ops.partitions(),
    help_text="List every partition: its resource and how many entities it holds.",
    columns=_PARTITION_COLUMNS,
    row=lambda p: (p.name, p.resource, str(p.entities)),
    to_json=lambda p: {"partition": p.name, "resource": p.resource, "entities": p.entities},
)


@partitions.command("unassign", cls=Command)
@click.argument("entity")
@_store_options
def unassign(entity: str, app_spec: str | None, store: str | None, as_json: bool) -> None:
    """Take ENTITY out of its partition (it then resolves to the default partition, if any)."""
    before = _run(app_spec, store, lambda ops: ops.unassign_entity(entity), existing=True)
    if as_json:
        echo_json({"entity": entity, "previous": before})
    elif before is None:
        click.echo(f"entity {entity!r} was in no partition")
    else:
        click.echo(f"entity {entity!r} taken out of partition {before!r}")


#: The command groups of this module, for the `shepherd` group.
COMMANDS = (resources, partitions)
