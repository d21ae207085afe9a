"""The governance every handling of an agent passes, whoever called the agent.

A workflow step (`ctx.call`) and a durable call (`app.call`, to a plain or an
exclusive agent) go through the same gates of their process, in the order
`shepherd.core.handling` decides: a capacity slot of the resource, then before
each try the service's circuit breaker and a rate token of the resource. The
agent worker builds them; the call server and the owner server of the same
process share them, so one process keeps one copy of each breaker, one stash
of tokens per resource, one line per resource's slots, and renews every slot
it holds in one statement.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, final

if TYPE_CHECKING:
    from shepherd.agents.breakers import BreakerGate
    from shepherd.governance.capacity import CapacityGate
    from shepherd.governance.rates import RateGate

__all__ = ["Gates"]


@final
@dataclass(frozen=True, slots=True)
class Gates:
    """One process's gates: circuit breakers, rate tokens and capacity slots.

    The slots are renewed by the agent worker that built the gates (its `run`),
    under its name: a call's slot is held and renewed like a step's.
    """

    breakers: BreakerGate
    rates: RateGate
    capacity: CapacityGate
