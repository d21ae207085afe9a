"""The App's metrics in Prometheus' text format, and the small server that answers scrapes.

`metrics_text(app)` is one scrape: the counters and histograms this process
keeps in `app.metrics` (`shepherd.metrics`), then gauges read from the store
at that moment (open tasks by `process_state`, queue depths per agent, each
breaker's state). The dashboard serves it at `/metrics`; `shepherd run` and
`shepherd worker` serve it with `--metrics-port` (`shepherd.exposition.server`).
"""

from __future__ import annotations

from shepherd.exposition.server import MetricsServer
from shepherd.exposition.text import CONTENT_TYPE, OPEN_STATES, metrics_text, store_families

__all__ = ["CONTENT_TYPE", "OPEN_STATES", "MetricsServer", "metrics_text", "store_families"]
