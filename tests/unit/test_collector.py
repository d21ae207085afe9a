"""The collector's first threshold while roles run: raised, shared, put back."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from shepherd.collector import raised_threshold


@pytest.fixture(autouse=True)
def _threshold() -> Iterator[tuple[int, int, int]]:
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield (700, 10, 10)
    gc.set_threshold(*before)


def test_raised_for_the_block_then_put_back() -> None:
    with raised_threshold(20000):
        assert gc.get_threshold() == (20000, 10, 10)
    assert gc.get_threshold() == (700, 10, 10)


def test_none_leaves_the_collector_alone() -> None:
    with raised_threshold(None):
        assert gc.get_threshold() == (700, 10, 10)


def test_never_lowered() -> None:
    gc.set_threshold(50000, 10, 10)
    with raised_threshold(20000):
        assert gc.get_threshold() == (50000, 10, 10)
    assert gc.get_threshold() == (50000, 10, 10)


def test_a_disabled_collector_stays_as_it_was() -> None:
    gc.disable()
    try:
        with raised_threshold(20000):
            assert gc.get_threshold() == (700, 10, 10)
            assert not gc.isenabled()
    finally:
        gc.enable()


def test_two_apps_in_one_process_put_it_back_when_the_last_stops() -> None:
    first = raised_threshold(20000)
    second = raised_threshold(20000)
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    assert gc.get_threshold() == (20000, 10, 10)  # the second still runs
    second.__exit__(None, None, None)
    assert gc.get_threshold() == (700, 10, 10)


def test_a_change_made_meanwhile_stays() -> None:
    with raised_threshold(20000):
        gc.set_threshold(1000, 10, 10)
    assert gc.get_threshold() == (1000, 10, 10)
