"""The demo's shepherd app: the seed's order workflow and its three agents.

`orders.process` reserves stock, charges the card and creates the shipment;
each step is a call to an agent wrapping one simulated remote service. A
declined card fails the charge step permanently, and shepherd compensates: the
reservation is released. An order whose steps keep timing out is compensated
too once it has failed `max_failures` times: whatever its steps did (or may
have done) is undone, newest first: shipment cancelled, card refunded, stock
released.

The app is built by `build_app(store, options)`, so that a worker process can
rebuild the very same app: `app_from_env()` reads the store URL from
`SHEPHERD_STORE` and the options from `SHEPHERD_DEMO_OPTIONS` (JSON).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from datetime import UTC, datetime, timedelta
from typing import Any, final

from shepherd.agents import AgentRequest, Handler
from shepherd.app import App
from shepherd.core.records import JsonValue
from shepherd.core.retry import RetryPolicy
from shepherd.core.supervision import BackoffPolicy
from shepherd.demo.services import FaultRates, Ledger, Services
from shepherd.scheduler import WorkflowContext

WORKFLOW = "orders.process"
OPTIONS_ENV = "SHEPHERD_DEMO_OPTIONS"

#: SKU -> unit price in cents.
CATALOG: dict[str, int] = {
    "sku-mug": 1200,
    "sku-tee": 2500,
    "sku-cap": 1800,
    "sku-sock": 900,
    "sku-book": 3400,
    "sku-lamp": 5600,
    "sku-pen": 300,
    "sku-bag": 4200,
}
MAX_QTY = 3


class DemoFailed(Exception):
    """The demo could not run to its end; the message says why."""


class DemoUsageError(DemoFailed):
    """The demo was given something it cannot use (such as a store that is not empty)."""


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class DemoOptions:
    """Everything a process needs to build the demo's app the same way as its peers."""

    orders: int = 500
    seed: int = 7
    transient_rate: float = 0.05
    slow_rate: float = 0.01
    hang_rate: float = 0.005
    decline_rate: float = 0.03
    #: Each step's window (seconds): past it, the agent is cancelled.
    step_within: float = 1.0
    #: Path of the simulated services' ledger (their own SQLite file).
    services: str = "services.db"
    #: Which process this is (0: the main one; 1, 2: workers); varies the fault sequence.
    generation: int = 0

    def rates(self) -> FaultRates:
        """The fault rates (validated)."""
        return FaultRates(
            transient=self.transient_rate,
            slow=self.slow_rate,
            hang=self.hang_rate,
            decline=self.decline_rate,
        )

    def to_json(self) -> str:
        """These options as JSON (for a worker's environment)."""
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> DemoOptions:
        """Options from `to_json`'s output; unknown fields are ignored."""
        data = json.loads(text)
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def make_order(n: int, seed: int) -> dict[str, JsonValue]:
    """Order number `n`: one to three lines of the catalog, the same for a given seed."""
    rng = random.Random(f"{seed}:order:{n}")
    skus = rng.sample(sorted(CATALOG), rng.randint(1, 3))
    qtys = [rng.randint(1, MAX_QTY) for _ in skus]
    items = [{"sku": sku, "qty": qty} for sku, qty in zip(skus, qtys, strict=True)]
    return {
        "order_id": f"order-{n}",
        "customer": f"customer-{rng.randrange(10_000):04d}",
        "items": items,
        "amount_cents": sum(CATALOG[sku] * qty for sku, qty in zip(skus, qtys, strict=True)),
        "address": f"{rng.randint(1, 999)} Market Street",
    }


def initial_stock(orders: int) -> dict[str, int]:
    """Enough of every SKU that no order runs out of stock."""
    return dict.fromkeys(CATALOG, MAX_QTY * max(orders, 1))


def open_services(options: DemoOptions) -> Services:
    """The simulated services over the ledger named in `options`, its shelves stocked."""
    ledger = Ledger(options.services)
    ledger.stock_up(initial_stock(options.orders))
    return Services(
        ledger,
        options.rates(),
        seed=options.seed,
        stream=options.generation,
        slow_seconds=options.step_within * 2,
    )


def _agent(services: Services, op: Callable[[AgentRequest], Any]) -> Handler:
    """A handler calling `op`, counting retries, re-executions and timeouts in the ledger."""
    ledger = services.ledger

    async def handle(request: AgentRequest) -> JsonValue:
        if request.retry > 0:
            ledger.bump("agent_retries")
        elif request.attempt > 1:
            ledger.bump("reexecutions")
        try:
            return await services.call(request.agent, lambda: op(request))
        except asyncio.CancelledError:
            # Cancelled at complete_by (and not because the worker is shutting down).
            if datetime.now(UTC) >= request.complete_by - timedelta(seconds=0.1):
                ledger.bump("timeouts")
            raise

    return handle


def _forward_key(request: AgentRequest) -> str:
    """The idempotency key of the forward step an undo request compensates."""
    return f"{request.task_id}/{request.payload['seq']}"


def _order_id(request: AgentRequest) -> str:
    return str(request.payload["request"]["order_id"])


def build_app(store: str, options: DemoOptions, services: Services | None = None) -> App:
    """The demo's app over `store`, its agents wrapping `services` (or ones opened from `options`)."""
    services = services if services is not None else open_services(options)
    within = options.step_within
    app = App(
        store,
        alerts=("log",),
        supervisor_interval=0.25,
        poll_interval=0.05,
        lease_ttl=2.0,
        default_step_within=within,
        # A worker's capacity: orders then end in waves, and the progress (and --crash) shows it.
        max_in_flight=max(8, min(100, options.orders // 10)),
    )
    retry = RetryPolicy(max_attempts=6, initial_delay=0.01, max_delay=0.1)
    agents: dict[str, Callable[[AgentRequest], Any]] = {
        "inventory.reserve": lambda r: services.reserve(r.idempotency_key, r.payload),
        "inventory.release": lambda r: services.release(_forward_key(r), _order_id(r)),
        "payments.charge": lambda r: services.charge(r.idempotency_key, r.payload),
        "payments.refund": lambda r: services.refund(_forward_key(r), _order_id(r)),
        "shipping.create": lambda r: services.ship(r.idempotency_key, r.payload),
        "shipping.cancel": lambda r: services.cancel_shipment(_forward_key(r), _order_id(r)),
    }
    for name, op in agents.items():
        app.agent(name, retry=retry, within=within)(_agent(services, op))

    @app.workflow(
        WORKFLOW,
        complete_within=2 * within,
        max_failures=4,
        on_exhausted="compensate",
        backoff=BackoffPolicy(initial=0.05, max_delay=1.0),
    )
    async def process_order(ctx: WorkflowContext, order: dict[str, Any]) -> JsonValue:
        """Reserve the stock, charge the card, ship the parcel."""
        reservation = await ctx.call(
            "inventory.reserve", order, within=within, undo="inventory.release"
        )
        charge = await ctx.call("payments.charge", order, within=within, undo="payments.refund")
        shipment = await ctx.call("shipping.create", order, within=within, undo="shipping.cancel")
        return {
            "order_id": order["order_id"],
            "reservation": reservation,
            "charge": charge,
            "shipment": shipment,
        }

    return app


def app_from_env() -> App:
    """The demo's app, rebuilt from `SHEPHERD_STORE` and `SHEPHERD_DEMO_OPTIONS`."""
    options = DemoOptions.from_json(os.environ.get(OPTIONS_ENV, "{}"))
    return build_app(os.environ.get("SHEPHERD_STORE", "sqlite:///shepherd.db"), options)


def __getattr__(name: str) -> App:
    """`shepherd.demo.app:app` builds the app from the environment on first access."""
    if name == "app":
        app = app_from_env()
        globals()["app"] = app
        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
