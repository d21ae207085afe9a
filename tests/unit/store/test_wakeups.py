"""Announcing rung channels to other processes: NOTIFY pairs and SQLite datagrams, both ways."""

from __future__ import annotations

import pytest

from shepherd.store import signals as ch
from shepherd.store.sqlite.wakeups import EVERYTHING, MAX_DATAGRAM, channels_of, datagrams
from shepherd.store.wakeups import CHANNELS, TASK_CHANNEL, local_channels, notifications

#: Ids as the store makes them: 20 hex characters.
TASK_IDS = [f"{n:020x}" for n in range(10_000)]


def rung_by(pairs: list[tuple[str, str]]) -> set[str]:
    return {channel for pair in pairs for channel in local_channels(*pair)}


def test_every_role_channel_is_announced_and_rung_back() -> None:
    rings = {*CHANNELS, ch.task_channel("t1"), ch.task_channel("t2")}

    pairs = notifications(rings)

    assert (TASK_CHANNEL, "t1,t2") in pairs
    assert rung_by(pairs) == rings


def test_channels_nobody_else_waits_on_are_not_announced() -> None:
    assert notifications({"something-local"}) == []
    assert local_channels("not_ours", "") == []


@pytest.mark.parametrize("limit", [7900, 100, 21])
def test_task_ids_are_split_into_payloads_within_the_limit(limit: int) -> None:
    rings = {ch.task_channel(task_id) for task_id in TASK_IDS[:1000]}

    pairs = notifications(rings, max_payload=limit)

    assert all(len(payload) <= limit for _, payload in pairs)
    assert rung_by(pairs) == rings


def test_a_datagram_rings_what_was_announced() -> None:
    rings = {ch.TASKS, ch.EVENTS, ch.task_channel(TASK_IDS[0])}

    [gram] = datagrams(rings)

    assert set(channels_of(gram)) == rings


def test_many_ended_tasks_take_several_datagrams_within_the_limit() -> None:
    rings = {ch.REPLIES, *(ch.task_channel(task_id) for task_id in TASK_IDS)}

    grams = datagrams(rings)

    assert len(grams) > 1
    assert all(len(gram) <= MAX_DATAGRAM for gram in grams)
    assert {channel for gram in grams for channel in channels_of(gram)} == rings


def test_nothing_to_announce_sends_nothing() -> None:
    assert datagrams(set()) == []
    assert datagrams({"something-local"}) == []


def test_everything_stands_alone() -> None:
    assert datagrams({EVERYTHING, ch.TASKS}) == [EVERYTHING.encode()]
    assert channels_of(EVERYTHING.encode()) == [EVERYTHING]


def test_a_garbled_datagram_rings_nothing() -> None:
    assert channels_of(b"\xff\xfe nonsense\n\n") == []
