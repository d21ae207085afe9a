"""The soak's records: its options, its per-minute samples, its figures, its shared state."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

from shepherd.bench.soak_probe import Restart
from shepherd.bench.soak_workers import Kill

#: The size at minute M may be at most this many times the size at minute M/2.
SIZE_GROWTH_LIMIT = 1.1


@dataclass(frozen=True, slots=True, kw_only=True)
class SoakOptions:
    """What `shepherd bench --workloads soak` was asked for."""

    minutes: float = 10.0
    rate: float = 200.0
    retention: float = 60.0
    purge_interval: float = 10.0
    kill_every: float = 90.0
    restart_every: float = 60.0
    restart_command: str | None = None
    sleep: float = 0.010
    synchronous: str = "FULL"
    drain_within: float = 600.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Sample:
    """One reading, `at_s` seconds after the first submit (`minute` = at_s / 60)."""

    at_s: float
    minute: float
    acknowledged: int
    processed: int
    #: Tasks not ended (`count_tasks`); None when the store did not answer.
    live: int | None
    #: SQLite main file (PostgreSQL: the database), its WAL, and their sum; None if unread.
    main_bytes: int | None
    wal_bytes: int | None
    store_bytes: int | None
    worker_rss_kib: list[int | None]


@dataclass(frozen=True, slots=True, kw_only=True)
class SoakResult:
    """The figures of one soak run."""

    workload: str
    store_kind: str
    minutes: float
    rate_target: float
    #: Acknowledged submits per second of the submit phase.
    rate_sustained: float
    step_sleep_s: float
    retention_s: float
    key_retention_s: float
    purge_interval_s: float
    kill_every_s: float
    restart_every_s: float | None
    restart_command: str | None
    #: Acknowledged submits, and how many the schedule called for.
    submitted: int
    scheduled: int
    #: Failed submit attempts (each retried with the same key), by error class.
    submit_errors: dict[str, int]
    submit_latency_p50_ms: float
    submit_latency_p99_ms: float
    submit_latency_max_ms: float
    #: How late, at worst, a submit started against its timer slot.
    schedule_lag_max_s: float
    processed: int
    #: Where each `processed` was seen: the event stream, the task row, the key's tombstone.
    processed_via: dict[str, int]
    ended_otherwise: int
    still_live: int
    tasks_lost: int
    drain_s: float
    drained: bool
    executions: int
    distinct_steps: int
    duplicated_executions: int
    #: Duplicates that repeated the same attempt (the reply died with a killed worker).
    duplicated_same_attempt: int
    #: Steps of processed tasks with no logged execution (must be 0).
    steps_missing: int
    kills: list[Kill]
    worker_failed_starts: int
    worker_unexpected_exits: int
    restarts: list[Restart]
    rss_start_kib: list[int | None]
    rss_end_kib: list[int | None]
    end_uptimes_s: list[float]
    samples: list[Sample]
    #: A last reading once every task has ended (or the drain gave up).
    after_drain: Sample
    size_half_bytes: int | None
    size_end_bytes: int | None
    size_ratio: float | None
    size_holds: bool
    stream_errors: int
    #: Store commits of the bench's and every worker's store (`shepherd.bench.counts`;
    #: a worker's as told just before its kill or stop), per acknowledged submit.
    commits_per_workflow: float = float("nan")


@dataclass(slots=True)
class RunState:
    """What the soak's concurrent jobs share while it runs."""

    started: float
    acked: set[str] = field(default_factory=set)
    #: Task id -> the terminal event kind seen on the stream.
    ended: dict[str, str] = field(default_factory=dict)
    processed: int = 0
    latencies: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    lag_max: float = 0.0
    stream_errors: int = 0
    samples: list[Sample] = field(default_factory=list)
    restarts: list[Restart] = field(default_factory=list)
    submit_end: float = 0.0
    #: Submits the timer called for (acknowledged or not).
    scheduled: int = 0

    def elapsed(self) -> float:
        return time.monotonic() - self.started


__all__ = ["SIZE_GROWTH_LIMIT", "RunState", "Sample", "SoakOptions", "SoakResult"]
