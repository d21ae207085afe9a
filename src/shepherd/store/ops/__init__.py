"""The store's operations: each declared once, as a typed value, in its concept's module.

An operation names what it needs and, through its type parameter, what it
returns: `ClaimTasks(locked_by=..., limit=...)` is an `Op[list[Task]]`. Each
concept's module (tasks, claims, steps, events, queues, done keys, breakers,
leases, supervision, workers, crashes, retention, resources, slots, rates,
owners, calls, alerts, operators, bulk) declares its operations, each with its
guarantee in its docstring, and the class of the store's methods that run
them (`claim_tasks = method(ClaimTasks)`); `shepherd.store.contract.Store` is
every such class together. Each backend keeps one table from operation type
to handler (`shepherd.store.dispatch`). Every operation is re-exported here:
`from shepherd.store.ops import ClaimTasks`. How to add one: docs/design.md,
"How to add a store operation".
"""

from __future__ import annotations

from shepherd.store.ops import (
    alerts,
    base,
    breakers,
    bulk,
    calls,
    children,
    claims,
    crashes,
    done_keys,
    events,
    leases,
    operators,
    owners,
    queues,
    rates,
    reminders,
    resources,
    retention,
    schedules,
    signalling,
    slots,
    steps,
    supervision,
    tasks,
    workers,
)
from shepherd.store.ops.alerts import *  # noqa: F403 - every name of every concept, re-exported
from shepherd.store.ops.base import *  # noqa: F403 - every name of every concept, re-exported
from shepherd.store.ops.breakers import *  # noqa: F403 - every name of every concept, re-exported
from shepherd.store.ops.bulk import *  # noqa: F403 - every name of every concept, re-exported
from shepherd.store.ops.calls import *  # noqa: F403 - every name of every concept, re-exported
from shepherd.store.ops.children import *  # noqa: F403 - every name of every concept, re-exported
from shepherd.store.ops.claims import *  # noqa: F403 - every name of every concept, re-exported
from shepherd.store.ops.crashes import *  # noqa: F403 - every name of every concept, re-exported
from shepherd.store.ops.done_keys import *  # noqa: F403 - every name of every concept, re-exported
from shepherd.store.ops.events import *  # noqa: F403 - every name of every concept, re-exported
from shepherd.store.ops.leases import *  # noqa: F403 - every name of every concept, re-exported
from shepherd.store.ops.operators import *  # noqa: F403 - every name of every concept, re-exported
from shepherd.store.ops.owners import *  # noqa: F403 - every name of every concept, re-exported
from shepherd.store.ops.queues import *  # noqa: F403 - every name of every concept, re-exported
from shepherd.store.ops.rates import *  # noqa: F403 - every name of every concept, re-exported
from shepherd.store.ops.reminders import *  # noqa: F403 - every name of every concept, re-exported
from shepherd.store.ops.resources import *  # noqa: F403 - every name of every concept, re-exported
from shepherd.store.ops.retention import *  # noqa: F403 - every name of every concept, re-exported
from shepherd.store.ops.schedules import *  # noqa: F403 - every name of every concept, re-exported
from shepherd.store.ops.signalling import *  # noqa: F403 - every name of every concept, re-exported
from shepherd.store.ops.slots import *  # noqa: F403 - every name of every concept, re-exported
from shepherd.store.ops.steps import *  # noqa: F403 - every name of every concept, re-exported
from shepherd.store.ops.supervision import *  # noqa: F403 - every name of every concept, re-exported
from shepherd.store.ops.tasks import *  # noqa: F403 - every name of every concept, re-exported
from shepherd.store.ops.workers import *  # noqa: F403 - every name of every concept, re-exported

__all__ = [
    *base.__all__,
    *alerts.__all__,
    *breakers.__all__,
    *bulk.__all__,
    *calls.__all__,
    *children.__all__,
    *claims.__all__,
    *crashes.__all__,
    *done_keys.__all__,
    *events.__all__,
    *leases.__all__,
    *operators.__all__,
    *owners.__all__,
    *queues.__all__,
    *rates.__all__,
    *reminders.__all__,
    *resources.__all__,
    *retention.__all__,
    *schedules.__all__,
    *signalling.__all__,
    *slots.__all__,
    *steps.__all__,
    *supervision.__all__,
    *tasks.__all__,
    *workers.__all__,
]
