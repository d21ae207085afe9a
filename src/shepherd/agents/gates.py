"""The governance every handling of an agent passes, whoever called the agent.

A workflow step (`ctx.call`) and a durable call (`app.call`, to a plain or an
exclusive agent) go through the same gates of their process, in the order
`shepherd.core.handling` decides: a capacity slot of the resource, then before
each try the service's circuit breaker and a rate token of the resource, and
after a transient failure a report to the breaker. The agent worker builds
them; the call server and the owner server of the same process share them, so
one process keeps one copy of each breaker, one stash of tokens per resource,
one line per resource's slots, and renews every slot it holds in one
statement. `Gates.next` passes one gate for any handling: the agent worker's
loop and the calls' loop differ only in how they try and how they end.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, cast, final

from shepherd.core.handling import Phase
from shepherd.errors import BreakerOpenError, UnknownResourceError

if TYPE_CHECKING:
    import random
    from collections.abc import Callable
    from datetime import datetime

    from shepherd.agents.agent import Agent
    from shepherd.agents.breakers import BreakerGate
    from shepherd.core.handling import Handling, Next
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

    async def next(
        self,
        phase: Phase,
        handling: Handling,
        spec: Agent,
        *,
        resource: str | None,
        holder: str,
        fail_fast: bool,
        now: Callable[[], datetime],
        complete_by: datetime,
        rng: random.Random,
    ) -> Next:
        """Pass `handling`'s gate `phase` (SLOT, BREAKER, RATE or REPORT); what is next.

        SLOT takes a slot of `resource` for `holder` (given back by the caller:
        `capacity.held(holder)`); BREAKER waits while the service's breaker is
        open, or, `fail_fast`, ends the handling with a `BreakerOpenError`; RATE
        spends a token of `resource`; REPORT tells the breaker a try failed. A
        resource that does not exist ends the handling with its error. The
        caller's deadline scope ends a wait.
        """
        if phase is Phase.BREAKER:
            if not fail_fast:
                await self.breakers.before_call(spec)
            elif not await self.breakers.admits(spec):
                return handling.breaker_open(BreakerOpenError(spec.name, spec.service_name))
            return handling.breaker_passed()
        if phase is Phase.REPORT:
            await self.breakers.after_call(spec, failed=True)
            return handling.reported(now=now(), complete_by=complete_by, rng=rng)
        try:
            if phase is Phase.RATE:
                await self.rates.before_call(cast("str", resource))
                return handling.token_taken()
            await self.capacity.acquire(cast("str", resource), holder)
            return handling.slot_taken()
        except UnknownResourceError as exc:
            return handling.refused(exc)
