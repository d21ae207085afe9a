"""The bench app as a deployed worker runs it: `shepherd run --app shepherd.bench.apart_app:app`.

The three no-op steps of `shepherd.bench.flow`, with the store and every other
setting read from `SHEPHERD_*` variables, so that a `shepherd run` process
started by W1apart, W4, W6 or lone runs with the settings of the client that
starts it. On SIGUSR1 it writes its store's counters where the bench asks
(`shepherd.bench.counts`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shepherd.bench.counts import answer_on_signal
from shepherd.bench.flow import build_app

if TYPE_CHECKING:
    from shepherd.app import App

APP = "shepherd.bench.apart_app:app"


def __getattr__(name: str) -> App:
    """`shepherd.bench.apart_app:app` builds the app from the environment on first access."""
    if name == "app":
        app = build_app(None)
        answer_on_signal(app)
        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
