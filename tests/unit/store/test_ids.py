"""Task ids: 20 hex characters, time first, and no two alike (threads and forks too)."""

from __future__ import annotations

import os
import re
import threading

from shepherd.store.ids import new_task_id


def test_an_id_is_twelve_hex_digits_of_time_then_eight_random_ones() -> None:
    first, second = new_task_id(), new_task_id()
    assert re.fullmatch(r"[0-9a-f]{20}", first)
    assert first[:12] <= second[:12]


def test_ids_drawn_by_many_threads_never_repeat() -> None:
    found: list[list[str]] = []

    def draw() -> None:
        found.append([new_task_id() for _ in range(5_000)])  # past one draw of bytes

    threads = [threading.Thread(target=draw) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    everything = [task_id for ids in found for task_id in ids]
    assert len(everything) == 20_000
    # Threads sharing their bytes would repeat thousands of random parts. 20,000
    # draws of 32 random bits repeat one about once in 20 runs (the birthday
    # bound), which the time part tells apart: a handful is chance, not sharing.
    assert 20_000 - len({task_id[12:] for task_id in everything}) <= 5
    assert len(set(everything)) >= 20_000 - 1


def test_a_forked_child_does_not_repeat_its_parents_ids() -> None:
    new_task_id()  # the parent holds unused random bytes
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next ids, then out
        os.write(write, ",".join(new_task_id() for _ in range(3)).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        child = pipe.read().split(",")
    os.waitpid(pid, 0)
    parent = [new_task_id() for _ in range(3)]
    assert len(child) == 3
    assert not {c[12:] for c in child} & {p[12:] for p in parent}
