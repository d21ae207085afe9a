"""Settings: keyword arguments over `SHEPHERD_*` environment variables over defaults.

Every value is validated when the settings are built; a bad one raises
ConfigError naming the field (and the environment variable it came from).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import final

from shepherd.core.resources import check_name
from shepherd.errors import ConfigError

__all__ = ["ENV_PREFIX", "Settings"]

#: Environment variables are named ENV_PREFIX + the field name in upper case.
ENV_PREFIX = "SHEPHERD_"

_SCHEMES = ("sqlite", "postgresql", "postgres")
_SYNCHRONOUS = ("FULL", "NORMAL")


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """How one shepherd process runs. Durations are float seconds.

    Attributes:
        store: The state store URL: `sqlite:///path` or `postgresql://...`.
        supervisor_interval: Seconds between the supervisor's scans.
        claim_batch: Most tasks a scheduler claims in one transaction.
        max_in_flight: Most workflows running at once in one scheduler.
        agent_concurrency: Most agent handlers running at once in one worker.
        agent_threads: Most handlers of `threads=True` agents running at once in
            one worker (each in a thread of its own; bounded by `agent_concurrency`).
        block_warning: Seconds the event loop may be blocked (by a handler or
            workflow that does not yield) before the watchdog logs a warning.
        poll_interval: Seconds between fallback polls when no wake-up arrives.
        idle_poll_max: Seconds the fallback poll of an idle loop grows to: each
            empty look doubles the wait, from `poll_interval` up to this; any
            work found resets it. Below `poll_interval`, it is `poll_interval`
            (no backoff).
        lease_ttl: Seconds a supervisor's leadership lease lasts unrenewed.
        default_complete_within: A workflow's default progress window, in seconds.
        default_step_within: A step's default deadline, in seconds.
        max_payload_bytes: Largest accepted payload, in bytes of UTF-8 JSON.
        sqlite_synchronous: SQLite durability, `FULL` (survives power loss) or
            `NORMAL` (faster; the last commits may be lost on power loss).
        read_pool_min: PostgreSQL: read connections a process keeps open (its
            writer and its listener have one connection each besides). Ignored
            by SQLite, which reads on its one connection.
        read_pool_max: PostgreSQL: most read connections a process opens at once;
            at least `read_pool_min`. Ignored by SQLite.
        store_timeout: Seconds one round trip to the store may take before this
            process gives up on it: a transaction, a read, a connect (PostgreSQL);
            the wait for the writers' turn and for SQLite's lock (SQLite). Past
            it the connection is closed and the caller gets
            `StoreUnavailableError` naming `store_timeout` (`CommitUnknownError`
            if the commit had been sent). Longer than any healthy round trip.
        breaker_refresh: Seconds an agent process trusts its copy of a circuit
            breaker before reading the shared one again.
        worker_beat: Seconds between a process's heartbeats in the worker registry.
        worker_ttl: Seconds without a heartbeat after which a process is deemed
            dead; longer than `worker_beat`.
        poison_crashes: A task that was running in this many worker processes
            that crashed is quarantined in `error` as suspected poison.
        max_owner_deaths: A task whose claim's owner process died more often
            than this goes to `error`.
        retention: Seconds an ended task (`processed`, `compensated`,
            `cancelled`) is kept after it ended; then the supervisor's leader
            deletes it with its steps, events and messages. Tasks in `error`
            are never deleted.
        key_retention: Seconds a purged task's idempotency key keeps its meaning:
            a submit of that key returns the purged task's id meanwhile.
        purge_batch: Most tasks deleted in one purge transaction.
        purge_interval: Seconds between the supervisor leader's purge passes
            (at least `supervisor_interval`).
        resolver_refresh: Seconds between a resolver's reads of the mapping's
            version, besides the wake-up every change sends: a change whose
            wake-up was lost is noticed within this long.
        resolver_refresh_ahead: Seconds between the refreshes of a resolver in
            use (one that resolved an entity since its last read): it reads the
            mapping's version this often and, after a move, the entities it had
            cached, ahead of the calls that will ask for them. A busy process so
            notices a change whose wake-up was lost within this long; an idle
            one reads nothing until `resolver_refresh`.
        slot_lease: Seconds a capacity slot lasts unrenewed: a handler's slot is
            renewed every third of it while held, and the slot of a process that
            died is free again within this long.
        default_partition: The partition an entity assigned to none resolves
            to; None (the default): such an entity is an `UnresolvedEntityError`.
        owner_lease: Seconds a process's ownership of an exclusive agent's key
            lasts unrenewed: it is renewed every third of it while held, and the
            keys of a process that died are taken over within this long.
        gc_threshold: While roles run (`App.run`), the garbage collector's
            first threshold is raised to this (see `shepherd.collector`); None
            leaves the process's collector as it is.

    Raises:
        ConfigError: A value is of the wrong type or out of range.
    """

    store: str = "sqlite:///shepherd.db"
    supervisor_interval: float = 1.0
    claim_batch: int = 256
    max_in_flight: int = 10000
    agent_concurrency: int = 1000
    agent_threads: int = 32
    block_warning: float = 1.0
    poll_interval: float = 0.2
    idle_poll_max: float = 2.0
    lease_ttl: float = 1.5
    default_complete_within: float = 30.0
    default_step_within: float = 30.0
    max_payload_bytes: int = 1048576
    sqlite_synchronous: str = "FULL"
    read_pool_min: int = 2
    read_pool_max: int = 8
    store_timeout: float = 5.0
    breaker_refresh: float = 1.0
    worker_beat: float = 1.0
    worker_ttl: float = 10.0
    poison_crashes: int = 3
    max_owner_deaths: int = 10
    retention: float = 604800.0
    key_retention: float = 2592000.0
    purge_batch: int = 500
    purge_interval: float = 60.0
    resolver_refresh: float = 30.0
    resolver_refresh_ahead: float = 5.0
    slot_lease: float = 15.0
    default_partition: str | None = None
    owner_lease: float = 10.0
    gc_threshold: int | None = 20000

    def __post_init__(self) -> None:
        for name in _TYPES:
            try:
                value = _normalize(name, getattr(self, name))
            except _Problem as problem:
                raise ConfigError(name, str(problem)) from None
            object.__setattr__(self, name, value)
        if self.read_pool_max < self.read_pool_min:
            raise ConfigError(
                "read_pool_max",
                f"must be at least read_pool_min ({self.read_pool_min}), not "
                f"{self.read_pool_max}: raise read_pool_max or lower read_pool_min",
            )
        if self.worker_ttl <= self.worker_beat:
            raise ConfigError(
                "worker_ttl",
                f"must be longer than worker_beat ({self.worker_beat:g} s), "
                f"not {self.worker_ttl:g} s: a live process would look dead between beats",
            )

    @property
    def idle_poll_cap(self) -> float:
        """The longest wait of an idle loop's poll: `idle_poll_max`, at least `poll_interval`."""
        return max(self.idle_poll_max, self.poll_interval)

    def __repr__(self) -> str:
        shown = {name: getattr(self, name) for name in _TYPES}
        shown["store"] = _redact(self.store)
        return f"Settings({', '.join(f'{k}={v!r}' for k, v in shown.items())})"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: object) -> Settings:
        """Build settings from keyword arguments, then the environment, then defaults.

        Args:
            env: The environment to read `SHEPHERD_<FIELD>` variables from;
                `os.environ` when None.
            **overrides: Field values, which win over the environment.

        Returns:
            The validated settings.

        Raises:
            ConfigError: An unknown field, or a value of the wrong type or out of
                range; the message names the field and any environment variable.
        """
        env = os.environ if env is None else env
        for name in overrides:
            if name not in _TYPES:
                raise ConfigError(name, f"unknown setting (known: {', '.join(_TYPES)})")
        values: dict[str, object] = {}
        for name, kind in _TYPES.items():
            if name in overrides:
                values[name] = overrides[name]
                continue
            var = ENV_PREFIX + name.upper()
            if var not in env:
                continue
            raw = env[var]
            shown = var if name == "store" else f"{var}={raw!r}"  # a URL may hold a password
            try:
                parsed = None if name in _OPTIONAL and not raw.strip() else _parse(raw, kind)
                values[name] = _normalize(name, parsed)
            except _Problem as problem:
                raise ConfigError(name, f"{problem} (from {shown})") from None
        return cls(**values)  # type: ignore[arg-type]


class _Problem(Exception):
    """What is wrong with one value; becomes a ConfigError naming the field."""


#: Field name -> its Python type (annotations are strings under `from __future__`).
_TYPES: dict[str, type] = {
    f.name: {"str": str, "int": int, "float": float}[str(f.type).removesuffix(" | None")]
    for f in fields(Settings)
}
#: The fields that may be None ("not set"); an empty environment variable sets None.
_OPTIONAL = frozenset(f.name for f in fields(Settings) if str(f.type).endswith(" | None"))


def _parse(raw: str, kind: type) -> object:
    text = raw.strip()
    if kind is int:
        try:
            return int(text)
        except ValueError:
            raise _Problem("must be an integer") from None
    if kind is float:
        try:
            return float(text)
        except ValueError:
            raise _Problem("must be a number of seconds") from None
    return text


def _normalize(name: str, value: object) -> object:
    kind = _TYPES[name]
    if value is None and name in _OPTIONAL:
        return None
    if kind is str:
        if not isinstance(value, str):
            raise _Problem(f"must be a string, not {type(value).__name__}")
        if name == "store":
            return _check_store(value)
        if name == "default_partition":
            problem = check_name("partition", value)
            if problem is not None:
                raise _Problem(problem)
            return value
        upper = value.upper()
        if upper not in _SYNCHRONOUS:
            raise _Problem(f"must be one of {', '.join(_SYNCHRONOUS)}, not {value!r}")
        return upper
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _Problem(f"must be a number, not {type(value).__name__}")
    if kind is int:
        if not isinstance(value, int):
            raise _Problem(f"must be an integer, not {value!r}")
        if value <= 0:
            raise _Problem(f"must be a positive integer, not {value}")
        return value
    if not math.isfinite(value) or value <= 0:
        raise _Problem(f"must be a positive number of seconds, not {value}")
    return float(value)


def _check_store(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    if not sep or not scheme:
        raise _Problem("must be a URL such as sqlite:///shepherd.db or postgresql://host/db")
    if scheme.lower() not in _SCHEMES:
        # Show only the scheme: the rest of a URL may hold a password.
        raise _Problem(
            f"unsupported scheme {scheme!r}; expected sqlite://, postgresql:// or postgres://"
        )
    if not rest:
        raise _Problem(f"{scheme}:// URL names no database")
    return url


def _redact(url: str) -> str:
    """The URL with any password replaced by `***`, for reprs and logs."""
    return re.sub(r"(://[^/@:]*:)[^/@]*@", r"\1***@", url)
