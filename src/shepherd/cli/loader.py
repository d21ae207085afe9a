"""The commands' edge: finding the App (`module:attr`, as uvicorn finds an ASGI app), running it.

Every problem found here is the user's (a typo, a missing file), so each one
raises a ShepherdError whose message names what was missing.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import importlib
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, TypeVar

import click

from shepherd.app import ROLES, App
from shepherd.assembly import pool_agents
from shepherd.cli.metrics_option import MetricsEndpoint
from shepherd.core.records import JsonValue
from shepherd.errors import ConfigError, PayloadError, ShepherdError
from shepherd.exposition import MetricsServer
from shepherd.payloads import loads

__all__ = [
    "load_app",
    "open_app",
    "parse_json_argument",
    "parse_roles",
    "run_with",
    "serve",
]

T = TypeVar("T")


def load_app(spec: str) -> App:
    """Import the App named by `spec`.

    Args:
        spec: `module:attr` (the attribute may be dotted), or `module` for the
            attribute `app`. The current directory is searched first.

    Returns:
        The App instance.

    Raises:
        ShepherdError: The module or the attribute is missing, or the attribute
            is not a shepherd App.
    """
    module_name, _, attrs = spec.partition(":")
    attrs = attrs or "app"
    if not module_name or not all(attrs.split(".")):
        raise ShepherdError(f"invalid --app {spec!r}: expected 'module:attribute' or 'module'")
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        # A missing dependency inside the module is a different problem than a typo.
        if exc.name is None or not _is_prefix(exc.name, module_name):
            raise ShepherdError(
                f"cannot import the app's module {module_name!r}: it needs {exc.name!r}, "
                "which is not installed"
            ) from None
        raise ShepherdError(f"cannot find the app's module {module_name!r} ({spec!r})") from None
    found: object = module
    for attr in attrs.split("."):
        try:
            found = getattr(found, attr)
        except AttributeError:
            raise ShepherdError(
                f"module {module_name!r} has no attribute {attrs!r} ({spec!r})"
            ) from None
    if not isinstance(found, App):
        kind = type(found).__name__
        article = "an" if kind[:1].lower() in "aeiou" else "a"
        raise ShepherdError(f"{module_name}:{attrs} is {article} {kind}, not a shepherd App")
    return found


def open_app(spec: str | None, store: str | None, *, existing: bool = False) -> App:
    """The App for a command: loaded from `spec`, or a bare one over `store`.

    Args:
        spec: `module:attr`, or None for an App with no workflows (enough for
            reading and operating on tasks).
        store: A store URL overriding the app's (from `--store` or
            `SHEPHERD_STORE`), or None.
        existing: Open only an existing store of this code's schema version,
            writing nothing when it is not (`App.migrate` False: for the
            commands that read or operate, which never create or migrate a
            store; opening then raises an UnusableStoreError, exit 6).

    Returns:
        The App, not yet opened.

    Raises:
        ShepherdError: The App cannot be found.
        ConfigError: The store URL is malformed or of an unsupported scheme.
    """
    if spec is None:
        app = App(store, alerts=())
    else:
        app = load_app(spec)
        if store is not None:
            app.settings = dataclasses.replace(app.settings, store=store)
    if existing:
        app.migrate = False
    return app


def parse_roles(text: str) -> tuple[str, ...]:
    """`scheduler,agent` -> the roles in their canonical order, without repeats.

    Raises:
        ConfigError: A role is unknown, or none is named.
    """
    named = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [role for role in named if role not in ROLES]
    if unknown:
        raise ConfigError("roles", f"unknown role {unknown[0]!r} (choose from {', '.join(ROLES)})")
    if not named:
        raise ConfigError("roles", f"name at least one of {', '.join(ROLES)}")
    return tuple(role for role in ROLES if role in named)


def _is_prefix(missing: str, module_name: str) -> bool:
    """Whether the missing module is `module_name` itself or one of its parents."""
    return module_name == missing or module_name.startswith(missing + ".")


class Closing(Protocol):
    """An App, or its `operations`: closed when a command's work is done."""

    async def close(self) -> None:
        """Close the store (and what else the App opened)."""


def run_with(app: Closing, work: Callable[[], Awaitable[T]]) -> T:
    """Run `work` in a new event loop (the async edge of a command), then close the app."""

    async def go() -> T:
        try:
            return await work()
        finally:
            await app.close()

    return asyncio.run(go())


def parse_json_argument(text: str | None, what: str) -> JsonValue:
    """Decode a JSON command-line argument (`-` reads stdin); None stays None.

    Stdin is read as bytes and decoded as UTF-8 here, so that a problem in it
    is reported as stdin's (with the offset of a byte that is not UTF-8), not
    as the argument's.

    Raises:
        PayloadError: The text is not acceptable JSON; the message says which
            argument, or `stdin`.
    """
    if text is None:
        return None
    if text == "-":
        what = "stdin"
        text = _read_stdin()
    try:
        return loads(text)
    except PayloadError as exc:
        raise PayloadError(f"{exc.message} (in {what})") from None


def _read_stdin() -> str:
    """All of stdin, as UTF-8.

    Raises:
        PayloadError: It is not UTF-8 (the message gives the first bad byte and its offset).
    """
    raw = getattr(sys.stdin, "buffer", None)
    if raw is None:  # a text-only stdin (replaced by a caller): already decoded
        return sys.stdin.read()
    data = raw.read()
    try:
        return str(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise PayloadError(
            f"payload is not UTF-8: byte 0x{data[exc.start]:02x} at offset {exc.start} (in stdin)"
        ) from None


async def serve(
    app: App,
    roles: Sequence[str],
    *,
    agents: Sequence[str] | None = None,
    metrics: MetricsEndpoint | None = None,
) -> None:
    """Run the roles (the agents matching `agents` only, if given) until SIGTERM or SIGINT.

    With `metrics`, GET /metrics is answered there while the roles run (the
    address is taken first: one in use fails before the store is opened).
    Then stop gracefully and close the app.

    Raises:
        ConfigError: The metrics address cannot be listened on.
    """
    served = "" if agents is None else f" agents={','.join(pool_agents(app.agents, agents))}"
    exporter = None if metrics is None else MetricsServer(app, host=metrics.host, port=metrics.port)
    if exporter is not None:
        await exporter.start()
        served += f" metrics={exporter.url}"
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    handled: list[signal.Signals] = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):  # no signal handlers on Windows
            loop.add_signal_handler(sig, stop.set)
            handled.append(sig)

    def ready() -> None:
        click.echo(f"shepherd ready: roles={','.join(roles)}{served} instance={app.instance}")
        sys.stdout.flush()

    try:
        await app.open()
        runner = asyncio.create_task(app.run(roles, agents=agents, ready=ready))
        stopper = asyncio.create_task(stop.wait())
        try:
            await asyncio.wait({runner, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopper.cancel()
            if not runner.done():
                # A log line, not an echo: with --log-format json, stderr holds JSON only.
                logging.getLogger("shepherd").info("shepherd stopping")
                runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await runner  # re-raises what made the roles fail
    finally:
        for sig in handled:
            loop.remove_signal_handler(sig)
        if exporter is not None:
            await exporter.close()
        await app.close()
