"""Exclusive owners: the agent role's side of agents declared with `exclusive_by`.

Each call to an exclusive agent carries an owning key (the seed's event type).
At most one process owns a key at a time (a lease with an epoch in the store),
and only it takes the key's calls, one at a time in the order sent, each
answered with the key's owner state in one transaction fenced on the epoch; a
step to the agent (`ctx.call`) is one of them, taken first and handled under
the steps' rules (`governance.owned_steps`).

This process looks at the keys with waiting calls, the leases, and the live
processes serving the agent (the worker registry), asks `core.ownership` which
keys to take and which to hand back (none owns more than its fair share), and
runs one loop per key it owns. Its leases are renewed every third of
`owner_lease`; a key whose renewal fails (the lease expired: the store was out
of reach, the process was paused) stops its loop, and another process takes it
over with the epoch bumped. When the roles stop, the keys are handed back at
once. Each ownership of a key runs the agent's `on_acquire` hook before its
first handling and `on_release` when it ends, and a key idle for the agent's
`owner_idle` seconds is handed back (`shepherd.governance.lifecycle`).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import logging
import random
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, final

from shepherd.agents.calls import call_request, handle_batch, handle_call
from shepherd.core.ownership import NO_STATE, plan_ownership
from shepherd.core.workers import WorkerState
from shepherd.errors import StoreUnavailableError
from shepherd.governance.backlogs import Backlogs
from shepherd.governance.handing import Handing, KeyInbox, rest_handed
from shepherd.governance.lifecycle import Failing, OwnerLife, Ownership
from shepherd.governance.owned_steps import OwnedSteps, unanswered_with
from shepherd.idle import IdleBackoff
from shepherd.outage import Outage
from shepherd.store import signals as ch
from shepherd.store.roles import OwnerStore

if TYPE_CHECKING:
    from shepherd.agents.agent import Agent
    from shepherd.agents.gates import Gates
    from shepherd.clock import Clock
    from shepherd.config import Settings
    from shepherd.core.records import CallRequest, JsonValue, Request
    from shepherd.registry import Standing

__all__ = ["OwnerServer", "owner_of"]

log = logging.getLogger("shepherd.agents.owners")

GaveUp = Callable[["CallRequest"], None]


def owner_of(instance: str) -> str:
    """The owner name of the process `instance` in key leases."""
    return f"{instance}/o"


@final
class OwnerServer(Handing):
    """Owns keys of the exclusive agents this process serves, and serves their calls.

    A step this process's scheduler starts for a key owned here is handed to
    the key's loop as it is queued (`Handing`, `shepherd.governance.handing`).

    Args:
        store: The store, as an owner server uses it.
        instance: This process's instance id (its owner name is `owner_of(instance)`).
        agents: The exclusive agents it serves, by name.
        settings: `owner_lease`, `worker_ttl` and polling.
        clock: What leases' renewals, deadlines and polling run on.
        gave_up: Told of each call given up (the App alerts an operator).
        failing: Told of a key whose `on_acquire` keeps failing (the App alerts).
        worker: The name its takes of steps lease their requests to: the agent
            worker name of this process (default `<instance>/a`), so that a
            crash is attributed to the steps it held, as for any request.
        gates: The governance of its process's agent worker: a key's handling
            holds a slot of the agent's resource (capacity across owners) and
            passes its breaker and rate, as a plain call's does.
    """

    def __init__(
        self,
        store: OwnerStore,
        *,
        instance: str,
        agents: Mapping[str, Agent],
        settings: Settings,
        clock: Clock,
        gave_up: GaveUp,
        gates: Gates,
        failing: Failing | None = None,
        worker: str | None = None,
    ) -> None:
        self.store = store
        self.gates = gates
        self.owner = owner_of(instance)
        self.agents = dict(agents)
        self.settings = settings
        self.clock = clock
        self.gave_up = gave_up
        self.lease = settings.owner_lease
        self.rng = random.Random()
        self.answered = 0
        #: Handlings answered (a batch counts once).
        self.flushes = 0
        #: Runs each ownership's hooks.
        self.life = OwnerLife(
            store, owner=self.owner, clock=clock, settings=settings, failing=failing
        )
        #: The loop of each key owned, by (agent, key).
        self._loops: dict[tuple[str, str], asyncio.Task[None]] = {}
        self._inboxes: dict[tuple[str, str], KeyInbox] = {}
        #: The keys whose loop is handling a call now.
        self._busy: set[tuple[str, str]] = set()
        #: The batching agents' key backlogs, shared by their key loops.
        self.backlogs = Backlogs(store)
        self.outage = Outage("exclusive owners", log=log, clock=clock, watch=store.watch)
        #: The steps of the keys owned (`ctx.call` to an exclusive agent).
        self.steps = OwnedSteps(
            store,
            owner=self.owner,
            worker=worker or f"{instance}/a",
            clock=clock,
            outage=self.outage,
            gates=gates,
        )
        #: Whether this process may take keys (its heartbeats reach the store); None: always.
        self.standing: Standing | None = None

    def statistics(self) -> dict[str, int]:
        return {
            "keys_owned": len(self._loops),
            "owned_answered": self.answered,
            "owned_flushes": self.flushes,
            **self.life.statistics(),
            "owned_steps_replied": self.steps.replied,
        }

    def owned(self) -> list[tuple[str, str]]:
        """The (agent, key) pairs this process owns now, sorted."""
        return sorted(self._loops)

    async def run(self) -> None:
        """Share out keys, renew leases and serve the keys owned, until cancelled."""
        if not self.agents:
            await asyncio.Event().wait()
        renewals = asyncio.create_task(self._renew_loop(), name="shepherd owner renewals")
        backoff = IdleBackoff(self.settings.poll_interval, self.settings.idle_poll_cap)
        try:
            while True:
                if renewals.done():
                    renewals.result()  # raises why the renewals ended
                    raise RuntimeError("the key lease renewals returned")
                if self.standing is not None and not self.standing.takes_work():
                    await self.standing.wait_takes_work()
                    continue
                wake = self.store.signals.event(ch.CALLS)
                try:
                    changed = await self._share_out()
                except StoreUnavailableError as exc:
                    await self.outage.pause(exc)
                    continue
                self.outage.over()
                await self.clock.wait_event(wake, backoff.next(found=changed))
        finally:
            renewals.cancel()
            await self._stop_all()

    async def _share_out(self) -> bool:
        """One look at every exclusive agent's keys: take or hand back; whether anything moved."""
        now = self.store.now()
        ttl = self.settings.worker_ttl
        workers = await self.store.list_workers(since=now - timedelta(seconds=ttl))
        moved = False
        for agent in sorted(self.agents):
            processes = {
                owner_of(w.instance)
                for w in workers
                if agent in w.agents and w.state(now=now, ttl=ttl) is WorkerState.ALIVE
            }
            keys = await self.store.waiting_keys(agent)
            leases = {lease.key: lease for lease in await self.store.list_key_leases(agent)}
            plan = plan_ownership(
                me=self.owner, now=now, processes=processes, leases=leases, keys=keys
            )
            take = self.life.takeable(agent, plan.take)
            if take:
                taken = await self.store.take_keys(agent, take, owner=self.owner, lease=self.lease)
                for got in taken:
                    self._start(agent, got.lease.key, got.lease.epoch, got.state)
                    moved = True
            idle = [
                k
                for k in plan.release
                if (agent, k) in self._loops and (agent, k) not in self._busy
            ]
            if idle:
                await self._stop([(agent, k) for k in idle])
                await self.store.release_keys(agent, idle, owner=self.owner)
                log.info("%s: handed back keys %s (over this process's share)", agent, idle)
                moved = True
        return moved

    def _start(self, agent: str, key: str, epoch: int, state: JsonValue) -> None:
        old = self._loops.pop((agent, key), None)
        if old is not None:
            old.cancel()
        log.info("%s: owns key %r (epoch %d)", agent, key, epoch)
        own = Ownership(
            agent=agent, key=key, epoch=epoch, state=state, active_at=self.clock.monotonic()
        )
        inbox = self._open(agent, key, epoch)
        task = asyncio.create_task(self._own(own, old, inbox), name=f"shepherd key {key}")
        self._loops[(agent, key)] = task
        task.add_done_callback(functools.partial(self._ended, (agent, key)))
        task.add_done_callback(lambda _: self._close(agent, key, inbox))

    def _ended(self, agent_key: tuple[str, str], task: asyncio.Task[None]) -> None:
        if self._loops.get(agent_key) is task:
            del self._loops[agent_key]
        self._busy.discard(agent_key)
        if not task.cancelled() and task.exception() is not None:
            log.error("the loop of key %r failed", agent_key[1], exc_info=task.exception())

    async def _stop(self, keys: list[tuple[str, str]]) -> None:
        tasks = [self._loops.pop(k) for k in keys if k in self._loops]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _stop_all(self) -> None:
        """Stop every key's loop and hand the keys back, so that others take them at once."""
        held = list(self._loops)
        await self._stop(held)
        by_agent: dict[str, list[str]] = {}
        for agent, key in held:
            by_agent.setdefault(agent, []).append(key)
        for agent, keys in by_agent.items():
            with contextlib.suppress(Exception):  # their leases expire anyway
                await asyncio.shield(self.store.release_keys(agent, keys, owner=self.owner))

    async def _renew_loop(self) -> None:
        """Renew this process's key leases every third of `owner_lease`; stop lost keys."""
        while True:
            await self.clock.sleep(self.lease / 3)
            if not self._loops:
                continue
            try:
                renewed = await self.store.renew_keys(owner=self.owner, lease=self.lease)
            except StoreUnavailableError as exc:  # the leases may lapse: their loops stop then
                log.warning("could not renew key leases: %s", exc)
                continue
            kept = {lease.key for lease in renewed}
            lost = [(a, k) for a, k in self._loops if k not in kept]
            if lost:
                log.warning("lost keys %s (their leases expired); another process takes them", lost)
                await self._stop(lost)

    async def _own(
        self, own: Ownership, before: asyncio.Task[None] | None, inbox: KeyInbox | None
    ) -> None:
        """One ownership of a key: `on_acquire`, its calls, `on_release`; hand it back if idle."""
        if before is not None:  # this process's previous ownership of the key ends first
            await asyncio.gather(before, return_exceptions=True)
        spec = self.agents[own.agent]
        idle = False
        try:
            if not await self.life.acquire(spec, own):
                return
            idle = await self._serve(spec, own, inbox)
        finally:
            self._close(own.agent, own.key, inbox)  # before its release: no step is handed now
            if own.acquired:
                await self.life.release(spec, own)
        if idle:
            log.info("%s: hands key %r back (idle %g s)", own.agent, own.key, spec.owner_idle)
            with contextlib.suppress(StoreUnavailableError):  # its lease expires anyway
                await self.store.release_keys(own.agent, [own.key], owner=self.owner)

    async def _rest(
        self, own: Ownership, idle: float | None, wake: asyncio.Event, seconds: float
    ) -> bool:
        """Wait for a call up to `seconds`; True, without waiting, once the key is idle."""
        left = own.idle_left(idle, self.clock.monotonic())
        if left is not None and left <= 0:
            return True
        await self.clock.wait_event(wake, seconds if left is None else min(seconds, left))
        return False

    async def _serve(self, spec: Agent, own: Ownership, inbox: KeyInbox | None) -> bool:
        """Take the key's calls one at a time (or a batch at a time), in order; answer
        each handling's calls with the owner state, in one transaction.

        A batch's answers also take the key's next batch when it is due (one
        commit per flush while the key is busy). A non-batching agent's key
        (`inbox`) handles the steps handed to it with those it takes, and takes
        only when the store may hold more (`KeyInbox.must_take`). Returns True
        once the key has had no call for `owner_idle` seconds, False once it
        has moved.
        """
        agent, key, epoch, idle = own.agent, own.key, own.epoch, spec.owner_idle
        batch = spec.batch
        limit = 1 if batch is None else batch.max_items
        backoff = IdleBackoff(self.settings.poll_interval, self.settings.idle_poll_cap)
        #: Whether the next look at the backlog must read it anew (after this key's flush).
        fresh = True
        #: Calls taken with the last answers, to handle next.
        taken: list[CallRequest] = []
        #: The key's backlog as the last answers read it, and the wake-up event
        #: taken before them: while no call has rung it, that backlog is current.
        flushed: tuple[asyncio.Event, tuple[int, datetime | None]] | None = None
        #: The key's step requests this loop handled without a reply: not taken again.
        unanswered: set[tuple[int, str, int, int]] = set()
        while True:
            given_up: list[CallRequest] = []
            if not taken:
                wake = self.store.signals.event(ch.CALLS)
                steps: list[Request] = []
                try:
                    if batch is not None:
                        if flushed is not None and flushed[0] is wake:  # not rung since
                            due = self.backlogs.due_of(batch, *flushed[1])
                        else:
                            due = await self.backlogs.due(agent, key, batch, wake, fresh=fresh)
                        fresh, flushed = False, None
                        if due is None:
                            if await self._rest(own, idle, wake, backoff.next(found=False)):
                                return True
                            continue
                        if due > 0:
                            await self.clock.wait_event(wake, due)
                            continue
                    if inbox is None or inbox.must_take():
                        steps, taken, given_up = await self.store.take_key_work(
                            agent,
                            key,
                            owner=self.owner,
                            epoch=epoch,
                            worker=self.steps.worker,
                            limit=limit,
                            skip=sorted(unanswered),
                        )
                        if inbox is not None:
                            full = len(steps) + len(taken) + len(given_up) >= limit
                            inbox.took(wake, steps, full=full)
                except StoreUnavailableError as exc:
                    await self.outage.pause(exc)
                    continue
                if inbox is not None:  # its steps in id order, handed or taken
                    head = inbox.next()
                    steps = [] if head is None else [head]
                if steps:  # a key's steps come before its calls
                    backoff.next(found=True)
                    fresh = True
                    self._busy.add((agent, key))
                    try:
                        owned, own.state, left = await self.steps.serve(
                            spec, key, epoch, own.state, steps
                        )
                    finally:
                        self._busy.discard((agent, key))
                        own.active_at = self.clock.monotonic()
                    if not owned:
                        return False
                    if left:
                        unanswered = unanswered_with(unanswered, steps)
                    continue
                self._gave_up(agent, given_up)
                if not taken:
                    if given_up:
                        continue
                    wait = backoff.next(found=False)
                    rest = functools.partial(self._rest, own, idle)
                    resting = (
                        rest(wake, wait) if inbox is None else rest_handed(rest, wake, wait, inbox)
                    )
                    if await resting:
                        return True
                    continue
            backoff.next(found=True)
            fresh = True
            self._busy.add((agent, key))
            wake = self.store.signals.event(ch.CALLS)
            try:
                owned, own.state, taken, backlog = await self._handle(spec, taken, epoch, own.state)
            finally:
                self._busy.discard((agent, key))
                own.active_at = self.clock.monotonic()
            if not owned:
                return False
            flushed = None if backlog is None else (wake, backlog)

    def _gave_up(self, agent: str, calls: list[CallRequest]) -> None:
        for call in calls:
            log.error(
                "call %s to %s given up after %d handlings", call.call_id, agent, call.attempt
            )
            self.gave_up(call)

    async def _handle(
        self, spec: Agent, calls: list[CallRequest], epoch: int, state: JsonValue
    ) -> tuple[bool, JsonValue, list[CallRequest], tuple[int, datetime | None] | None]:
        """Handle calls of one key (one, or a batch) and answer them with the owner state.

        Every request of a batch sees the same owner state; the one committed is
        the last one a request was given (`request.owner_state = ...`), else the
        shared one, changed in place or not. Returns whether the key is still
        owned, its owner state now, the next batch if the answers took it, and
        else the key's backlog as the answers read it (None: not read).
        """
        shared = copy.deepcopy(state)
        requests = []
        for call in calls:
            request = call_request(call)
            request.owner_key = call.owner_key
            request.owner_epoch = epoch
            request.owner_state = shared
            requests.append(request)
        gates, clock, store, rng = self.gates, self.clock, self.store, self.rng
        answers: list[tuple[bool, JsonValue]] | None
        if spec.batch is None:
            one = await handle_call(
                spec, requests[0], calls[0], gates=gates, clock=clock, store=store, rng=rng
            )
            answers = None if one is None else [one]
        else:
            answers = await handle_batch(
                spec, requests, calls, gates=gates, clock=clock, store=store, rng=rng
            )
        if answers is None:  # taken again: its handlings are counted, a poison call ends
            return True, state, [], None
        new_state = next(
            (r.owner_state for r in reversed(requests) if r.owner_state is not shared), shared
        )
        changed = new_state != state
        key = str(calls[0].owner_key)
        written = [
            (call.call_id, call.attempt, ok, body)
            for call, (ok, body) in zip(calls, answers, strict=True)
        ]
        committed = new_state if changed else NO_STATE
        following: list[CallRequest] = []
        backlog: tuple[int, datetime | None] | None = None
        try:
            if spec.batch is None:
                owned = await self.store.answer_owned(
                    spec.name, key, owner=self.owner, epoch=epoch, answers=written, state=committed
                )
            else:
                owned, following, given_up, backlog = await self.store.answer_and_take(
                    spec.name,
                    key,
                    owner=self.owner,
                    epoch=epoch,
                    answers=written,
                    state=committed,
                    max_items=spec.batch.max_items,
                    max_delay=spec.batch.max_delay,
                )
                self._gave_up(spec.name, given_up)
        except StoreUnavailableError as exc:
            log.warning("calls of key %r: answers not stored (%s); taken again", key, exc)
            return True, state, [], None
        if not owned:
            log.warning(
                "%s: key %r moved to another owner; its answers were refused",
                spec.name,
                calls[0].owner_key,
            )
            return False, state, [], None
        self.answered += len(calls)
        self.flushes += 1
        return True, new_state, following, None if following else backlog
