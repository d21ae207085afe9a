"""`--metrics-port PORT` and `--metrics-host HOST`: the role commands' Prometheus endpoint."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, final

import click

__all__ = ["MetricsEndpoint", "endpoint", "metrics_options"]

F = TypeVar("F", bound=Callable[..., Any])


@final
@dataclass(frozen=True, slots=True)
class MetricsEndpoint:
    """Where a role process serves GET /metrics."""

    host: str
    port: int


def metrics_options(fn: F) -> F:
    """`--metrics-port PORT` and `--metrics-host HOST`.

    The command receives `metrics_port` (None: no endpoint) and `metrics_host`;
    `endpoint` makes them one `MetricsEndpoint`, or None.
    """
    fn = click.option(
        "--metrics-host",
        metavar="HOST",
        default="127.0.0.1",
        show_default=True,
        help="The address --metrics-port listens on (0.0.0.0 for every interface).",
    )(fn)
    return click.option(
        "--metrics-port",
        metavar="PORT",
        type=click.IntRange(0, 65535),
        help="Serve Prometheus metrics at http://HOST:PORT/metrics from this process "
        "(0: a free port, printed on the ready line). Default: no endpoint.",
    )(fn)


def endpoint(host: str, port: int | None) -> MetricsEndpoint | None:
    """The endpoint the options ask for, or None without --metrics-port."""
    return None if port is None else MetricsEndpoint(host=host, port=port)
