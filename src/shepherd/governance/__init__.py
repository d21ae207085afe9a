"""Resource governance: the limits every call of an agent passes through.

`resolver` tells where an entity lives (the store's mapping, or a function);
`capacity` and `rates` are an agent worker's gates on a resource's slots and
rate tokens (`unlimited` remembers the resources without either); `owners`
serves the keys of exclusive agents, one owner process per key; `batch` is how
an owner gathers a key's calls into one handling. The gates sit below the agent
role; the owner server runs the agents' handlers, so it builds on the agent
role and is not imported here.
"""

from __future__ import annotations

from shepherd.governance.batch import Batch
from shepherd.governance.resolver import Resolver, StaticResolver, StoreResolver

__all__ = ["Batch", "Resolver", "StaticResolver", "StoreResolver"]
