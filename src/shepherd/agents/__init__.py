"""The Agent role: agent workers run the handlers that wrap remote services.

`agent` is a registered agent and its options, `worker` takes requests and runs
handlers with retries under `complete_by` (what happens next is decided by
`shepherd.core.handling`; `intake` decides which requests to take, `ends` carries
out how a handling ends), `request` is what a handler receives, `threads` runs
blocking handlers off the event loop, `breakers` is the worker's gate on the
circuit breakers shared through the store, `calls` serves durable calls
(`app.call`), `http` makes an agent of an HTTP endpoint. The gates on resources
(capacity, rates), exclusive owners and batches are `shepherd.governance`'s.
"""

from __future__ import annotations

from shepherd.agents.agent import Agent, Handler
from shepherd.agents.request import AgentRequest
from shepherd.agents.worker import AgentWorker

__all__ = ["Agent", "AgentRequest", "AgentWorker", "Handler"]
