"""The bench app as a deployed worker runs it: `shepherd run --app shepherd.bench.apart_app:app`.

The three no-op steps of `shepherd.bench.flow`, with the store and every other
setting read from `SHEPHERD_*` variables, so that a `shepherd run` process
started by W4, W6 or lone runs with the settings of the client that starts it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shepherd.bench.flow import build_app

if TYPE_CHECKING:
    from shepherd.app import App

APP = "shepherd.bench.apart_app:app"


def __getattr__(name: str) -> App:
    """`shepherd.bench.apart_app:app` builds the app from the environment on first access."""
    if name == "app":
        return build_app(None)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
