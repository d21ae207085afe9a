"""`shepherd demo`: the seed's e-commerce example, runnable with no set-up.

Five hundred orders go through reserve stock -> charge payment -> create shipment
against simulated services that fail, stall, hang and decline cards; shepherd
brings every order to an end. `--crash` also kills a worker process mid-run.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable

from rich.console import Console

from shepherd.errors import ShepherdError

__all__ = ["build_parser", "cli_main"]


def _rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text} is not a rate between 0 and 1")
    return value


def _positive(kind: type[int] | type[float]) -> Callable[[str], int | float]:
    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a {kind.__name__}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"{text} must be positive")
        return value

    return parse


def build_parser() -> argparse.ArgumentParser:
    """The command line of `shepherd demo`."""
    parser = argparse.ArgumentParser(
        prog="shepherd demo",
        description="Process orders (reserve stock, charge payment, create shipment) against "
        "unreliable simulated services, and show that every order ends: processed, or "
        "compensated (stock released, card refunded).",
    )
    add = parser.add_argument
    add(
        "--orders",
        type=_positive(int),
        default=500,
        metavar="N",
        help="orders to submit (default 500)",
    )
    add(
        "--store",
        metavar="URL",
        help="state store URL (default: a fresh SQLite file in a temporary directory)",
    )
    add(
        "--keep",
        action="store_true",
        help="keep the temporary directory (store, services' ledger, logs)",
    )
    add(
        "--crash",
        action="store_true",
        help="run scheduler+agent in a worker process and SIGKILL it mid-run",
    )
    add(
        "--transient-rate",
        type=_rate,
        default=0.05,
        metavar="P",
        help="per call: transient failure (default 0.05)",
    )
    add(
        "--slow-rate",
        type=_rate,
        default=0.01,
        metavar="P",
        help="per call: answer after complete_by (default 0.01)",
    )
    add(
        "--hang-rate",
        type=_rate,
        default=0.005,
        metavar="P",
        help="per call: never answer (default 0.005)",
    )
    add(
        "--decline-rate",
        type=_rate,
        default=0.03,
        metavar="P",
        help="per order: card declined (default 0.03)",
    )
    add("--seed", type=int, default=7, help="random seed of orders and faults (default 7)")
    add(
        "--deadline",
        type=_positive(float),
        default=120.0,
        metavar="SECONDS",
        help="give up after this long (default 120)",
    )
    add("--json", action="store_true", help="print the summary as JSON")
    add("--no-progress", action="store_true", help="no live progress bar")
    add("--worker", action="store_true", help=argparse.SUPPRESS)
    return parser


def cli_main(args: list[str]) -> int:
    """Run `shepherd demo` with `args` (the words after `demo`); return the exit status."""
    from shepherd.demo.app import DemoFailed, DemoOptions, DemoUsageError
    from shepherd.demo.run import DemoConfig, run_demo
    from shepherd.demo.worker import run_worker

    try:
        ns = build_parser().parse_args(args)
    except SystemExit as exc:  # --help, or a bad option (argparse printed why)
        return exc.code if isinstance(exc.code, int) else 2
    if ns.worker:
        return asyncio.run(run_worker())
    try:
        options = DemoOptions(
            orders=ns.orders,
            seed=ns.seed,
            transient_rate=ns.transient_rate,
            slow_rate=ns.slow_rate,
            hang_rate=ns.hang_rate,
            decline_rate=ns.decline_rate,
        )
        options.rates()
    except ValueError as exc:
        return _error(str(exc), 2)
    config = DemoConfig(
        options=options,
        store=ns.store,
        keep=ns.keep,
        crash=ns.crash,
        json=ns.json,
        progress=not ns.no_progress,
        deadline=ns.deadline,
    )
    try:
        return asyncio.run(run_demo(config, Console()))
    except (DemoUsageError, ShepherdError) as exc:
        return _error(str(exc), 2)
    except DemoFailed as exc:
        return _error(f"the demo failed: {exc}", 1)
    except KeyboardInterrupt:
        return 130


def _error(message: str, code: int) -> int:
    print(f"error: {message}", file=sys.stderr)
    return code
