"""Which function runs each store operation on SQLite: one table for writes, one for reads.

A write handler gets every operation of its type in the batch and returns one
outcome per operation, in order (a value, or an exception for that caller
alone). A read handler gets the connection, the store clock's instant (unix
seconds) and the operation. `entry` checks, with mypy, that each handler takes
the operation type it is filed under.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from shepherd.store import ops
from shepherd.store.sqlite import (
    breakers,
    crashes,
    keys,
    leases,
    operator,
    queues,
    retention,
    steps,
    tasks,
    workers,
)
from shepherd.store.sqlite.batch import Batch

__all__ = ["READS", "WRITES", "ReadHandler", "WriteHandler"]

W = TypeVar("W", bound=ops.Write[Any])
Q = TypeVar("Q", bound=ops.Read[Any])

#: Runs every operation of one type in the batch; one outcome per operation.
WriteHandler = Callable[[Batch, Sequence[Any]], list[object]]
#: Runs one read on the connection at the given instant.
ReadHandler = Callable[[sqlite3.Connection, float, Any], Any]


def write(
    op: type[W], handler: Callable[[Batch, Sequence[W]], list[object]]
) -> tuple[type[ops.Write[Any]], WriteHandler]:
    return op, handler


def read(
    op: type[Q], handler: Callable[[sqlite3.Connection, float, Q], object]
) -> tuple[type[ops.Read[Any]], ReadHandler]:
    return op, handler


WRITES: dict[type[ops.Write[Any]], WriteHandler] = dict(
    [
        write(ops.SubmitTask, tasks.submit),
        write(ops.ClaimTasks, tasks.claim),
        write(ops.StartStep, steps.start_step),
        write(ops.RecordReplies, steps.record_replies),
        write(ops.FinishTask, tasks.finish),
        write(ops.FailTask, tasks.fail),
        write(ops.StartCompensation, tasks.start_compensation),
        write(ops.ReleaseTasks, tasks.release),
        write(ops.TakeRequests, queues.take),
        write(ops.ReplyAndAck, queues.reply),
        write(ops.Note, queues.note),
        write(ops.ExtendStep, keys.extend_step),
        write(ops.BeginOnce, keys.begin_once),
        write(ops.FinishOnce, keys.finish_once),
        write(ops.AbandonOnce, keys.abandon_once),
        write(ops.BreakerAllow, breakers.allow),
        write(ops.BreakerReport, breakers.report),
        write(ops.AcquireLease, leases.acquire),
        write(ops.ReleaseLease, leases.release),
        write(ops.ApplySupervision, leases.supervise),
        write(ops.RetryTask, operator.retry),
        write(ops.CancelTask, operator.cancel),
        write(ops.RegisterWorker, workers.register),
        write(ops.BeatWorker, workers.beat),
        write(ops.StopWorker, workers.stop),
        write(ops.MarkDied, crashes.mark_died),
        write(ops.ReapWorker, crashes.reap),
        write(ops.ApplyCrash, crashes.apply),
        write(ops.PurgeTasks, retention.purge_tasks),
        write(ops.PurgeTombstones, retention.purge_tombstones),
    ]
)

READS: dict[type[ops.Read[Any]], ReadHandler] = dict(
    [
        read(ops.GetTask, tasks.get_task),
        read(ops.ListTasks, tasks.list_tasks),
        read(ops.CountTasks, tasks.count_tasks),
        read(ops.TaskEvents, queues.task_events),
        read(ops.ReadEvents, queues.read_events),
        read(ops.GetBreaker, breakers.get_breaker),
        read(ops.ListBreakers, breakers.list_breakers),
        read(ops.BreakerEvents, breakers.breaker_events),
        read(ops.ExpiredClaims, leases.expired_claims),
        read(ops.ListWorkers, workers.list_workers),
        read(ops.DeadWorkers, workers.dead_workers),
        read(ops.UnreapedWorkers, crashes.unreaped_workers),
        read(ops.CrashVictims, crashes.crash_victims),
        read(ops.GetTombstone, retention.get_tombstone),
    ]
)
