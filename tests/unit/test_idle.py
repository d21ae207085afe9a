"""An idle loop's fallback poll: doubles after each empty look, up to a cap; work resets it."""

from __future__ import annotations

import pytest

from shepherd.idle import IdleBackoff


def test_each_empty_look_doubles_the_wait_up_to_the_cap() -> None:
    backoff = IdleBackoff(0.2, 2.0)
    waits = [backoff.next(found=False) for _ in range(7)]
    assert waits == pytest.approx([0.2, 0.4, 0.8, 1.6, 2.0, 2.0, 2.0])


def test_work_found_resets_the_wait() -> None:
    backoff = IdleBackoff(0.25, 4.0)
    assert [backoff.next(found=False) for _ in range(4)] == [0.25, 0.5, 1.0, 2.0]
    assert backoff.next(found=True) == 0.25
    assert backoff.next(found=False) == 0.25
    assert backoff.next(found=False) == 0.5
    assert backoff.next(found=True) == 0.25
    assert backoff.next(found=True) == 0.25


def test_a_cap_equal_to_the_first_wait_keeps_polling_promptly() -> None:
    backoff = IdleBackoff(0.2, 0.2)
    assert [backoff.next(found=False) for _ in range(3)] == [0.2, 0.2, 0.2]


@pytest.mark.parametrize(("first", "cap"), [(0.0, 1.0), (-1.0, 1.0), (2.0, 1.0)])
def test_a_cap_below_the_first_wait_is_refused(first: float, cap: float) -> None:
    with pytest.raises(ValueError, match="first <= cap"):
        IdleBackoff(first, cap)
