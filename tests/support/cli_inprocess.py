"""Run a `shepherd ...` command line in this process, as `python -m shepherd` would run it.

For the CLI tests whose point is what a command prints and what it does to the
store, not the process: starting a Python process costs about half a second,
this a few milliseconds. It calls `shepherd.cli.run_cli` (what `main` exits
with) under click's `CliRunner` isolation: stdin, stdout and stderr are the
runner's, the environment is exactly `env` (as `subprocess.run(env=...)` gives
it), the working directory is `cwd`. Afterwards it puts back what a command may
change in the process: the environment, the directory, `sys.path`, the modules
imported from `cwd` (an app module such as `cliapp`, which the next test writes
anew), the root logger's handlers and the log levels, and the OpenTelemetry
tracer provider an app module may set at import (docs/howto/tracing.md's does),
with what shepherd.tracing remembers of it.

What needs a real process (exit by signal, readiness lines, two processes on
one store, the interpreter's own start-up) stays with the `shepherd_cli` and
`shepherd_process` fixtures of tests/e2e/conftest.py.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from click.testing import CliRunner

from shepherd.cli import run_cli

__all__ = ["run_in_process"]


def run_in_process(
    args: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    stdin: str | bytes | None = None,
    merged: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Run `shepherd ARGS...` here; what it returned and printed, as `subprocess.run` reports it.

    With `merged`, stdout holds stdout and stderr interleaved as they were
    written (as `stderr=subprocess.STDOUT` gives them, unbuffered), stderr "".
    """
    overrides: dict[str, str | None] = {name: None for name in os.environ if name not in env}
    overrides.update(env)
    with (
        _restored(cwd),
        _tracing_restored(),
        CliRunner().isolation(input=stdin, env=overrides) as (out, err, both),
    ):
        code = run_cli(list(args))
        sys.stdout.flush()
        sys.stderr.flush()
        stdout, stderr = (both.getvalue(), b"") if merged else (out.getvalue(), err.getvalue())
    return subprocess.CompletedProcess(
        ["shepherd", *args], code, stdout.decode(), stderr.decode(errors="backslashreplace")
    )


@contextmanager
def _restored(cwd: Path) -> Iterator[None]:
    """Work in `cwd`; afterwards undo what a command may have changed in this process."""
    before_dir = os.getcwd()
    before_path = list(sys.path)
    before_modules = set(sys.modules)
    root = logging.getLogger()
    before_handlers = list(root.handlers)
    before_levels = {
        name: logger.level
        for name, logger in logging.Logger.manager.loggerDict.items()
        if isinstance(logger, logging.Logger)
    }
    before_root_level = root.level
    os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(before_dir)
        sys.path[:] = before_path
        here = str(cwd.resolve())
        for name in set(sys.modules) - before_modules:
            origin = getattr(sys.modules[name], "__file__", None) or ""
            if origin.startswith(here):
                del sys.modules[name]
        for handler in [h for h in root.handlers if h not in before_handlers]:
            root.removeHandler(handler)
            handler.close()
        root.setLevel(before_root_level)
        for name, logger in logging.Logger.manager.loggerDict.items():
            if isinstance(logger, logging.Logger):
                logger.setLevel(before_levels.get(name, logging.NOTSET))


@contextmanager
def _tracing_restored() -> Iterator[None]:
    """Put back the process's tracer provider (set once per process) as it was before."""
    from opentelemetry import trace
    from opentelemetry.util._once import Once

    from shepherd import tracing

    provider = trace._TRACER_PROVIDER
    was_set = trace._TRACER_PROVIDER_SET_ONCE._done
    remembered = (tracing._provider_set, tracing._asked_at)
    proxy = tracing._TRACER if isinstance(tracing._TRACER, trace.ProxyTracer) else None
    real = None if proxy is None else proxy._real_tracer
    try:
        yield
    finally:
        if trace._TRACER_PROVIDER is not provider:
            trace._TRACER_PROVIDER = provider
            once = Once()
            once._done = was_set
            trace._TRACER_PROVIDER_SET_ONCE = once
            tracing._provider_set, tracing._asked_at = remembered
            if proxy is not None:
                proxy._real_tracer = real
