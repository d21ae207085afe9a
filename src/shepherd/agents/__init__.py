"""The Agent role: agent workers run the handlers that wrap remote services.

`worker` takes requests and runs handlers with retries under `complete_by`,
`request` is what a handler receives, `threads` runs blocking handlers off the
event loop, `breakers` is the worker's gate on the circuit breakers shared
through the store, `http` makes an agent of an HTTP endpoint.
"""

from __future__ import annotations

from shepherd.agents.request import AgentRequest
from shepherd.agents.worker import Agent, AgentWorker, Handler

__all__ = ["Agent", "AgentRequest", "AgentWorker", "Handler"]
