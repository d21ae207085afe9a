"""Exclusive owners' plans: keys spread over processes, taken once, never over the share."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from shepherd.core.ownership import KeyLease, fair_share, plan_ownership

NOW = datetime(2026, 1, 1, tzinfo=UTC)
LEASE = timedelta(seconds=10)


def lease(key: str, owner: str, *, epoch: int = 1, live: bool = True) -> KeyLease:
    until = NOW + LEASE if live else NOW - timedelta(seconds=1)
    return KeyLease(key=key, owner=owner, epoch=epoch, lease_until=until)


def test_fair_share_rounds_up_and_is_zero_without_keys() -> None:
    assert fair_share(8, 3) == 3
    assert fair_share(9, 3) == 3
    assert fair_share(10, 3) == 4
    assert fair_share(0, 3) == 0
    assert fair_share(5, 0) == 5


def test_a_lone_process_takes_every_key() -> None:
    plan = plan_ownership(me="a", now=NOW, processes=["a"], leases={}, keys=["k1", "k2", "k3"])
    assert sorted(plan.take) == ["k1", "k2", "k3"]
    assert plan.release == ()


def test_a_process_takes_only_up_to_its_share_of_free_keys() -> None:
    keys = [f"k{i}" for i in range(8)]
    plan = plan_ownership(me="a", now=NOW, processes=["a", "b", "c"], leases={}, keys=keys)
    assert len(plan.take) == 3


def test_live_leases_of_others_are_not_taken_and_expired_ones_are() -> None:
    leases = {"k1": lease("k1", "b"), "k2": lease("k2", "b", live=False)}
    plan = plan_ownership(me="a", now=NOW, processes=["a", "b"], leases=leases, keys=["k1", "k2"])
    assert plan.take == ("k2",)


def test_a_process_over_its_share_hands_back_the_extra_keys() -> None:
    leases = {f"k{i}": lease(f"k{i}", "a") for i in range(8)}
    plan = plan_ownership(
        me="a", now=NOW, processes=["a", "b", "c"], leases=leases, keys=list(leases)
    )
    assert plan.take == ()
    assert len(plan.release) == 5
    assert set(plan.release) <= set(leases)


@settings(max_examples=200, deadline=None)
@given(
    n_keys=st.integers(min_value=0, max_value=20),
    n_procs=st.integers(min_value=1, max_value=6),
    order=st.lists(st.integers(min_value=0, max_value=5), min_size=1, max_size=60),
)
def test_rounds_of_plans_converge_to_every_key_owned_once_within_the_share(
    n_keys: int, n_procs: int, order: list[int]
) -> None:
    """Processes act in any order on the store's current leases; takes are fenced.

    After every process has acted twice more in turn, every key is owned by
    exactly one process and none owns more than the fair share.
    """
    keys = [f"k{i}" for i in range(n_keys)]
    procs = [f"p{i}" for i in range(n_procs)]
    leases: dict[str, KeyLease] = {}

    def act(me: str) -> None:
        plan = plan_ownership(me=me, now=NOW, processes=procs, leases=leases, keys=keys)
        for key in plan.release:
            del leases[key]
        for key in plan.take:
            held = leases.get(key)
            if held is not None and held.live(NOW):
                continue  # the store refuses a take of a live lease
            epoch = 1 if held is None else held.epoch + 1
            leases[key] = lease(key, me, epoch=epoch)

    for i in order:
        act(procs[i % n_procs])
    for _ in range(2):
        for me in procs:
            act(me)
    assert set(leases) == set(keys)
    share = fair_share(n_keys, n_procs)
    for me in procs:
        assert sum(1 for x in leases.values() if x.owner == me) <= share
