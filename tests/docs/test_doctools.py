"""The docs harness itself: what the normaliser forgives, and what it does not."""

from __future__ import annotations

import pytest
from doctools import Command, LogLines, Normaliser, code_blocks, session_steps

PAGE = """\
Intro.

```console
$ shepherd submit --app shop:app orders.process '{}' --key A-1
01a201a662ed02c196c5
$ shepherd show 01a201a662ed02c196c5 --app shop:app
id  01a201a662ed02c196c5
```

- A list item:

  ```text
  ERROR shepherd.alerts: task 01a201a662ed02c196c5 needs an operator
  ```
"""


def test_a_session_is_the_pages_commands_and_log_lines_in_order() -> None:
    steps = session_steps(PAGE)
    assert steps == [
        Command(
            "shepherd submit --app shop:app orders.process '{}' --key A-1",
            "01a201a662ed02c196c5",
            4,
        ),
        Command("shepherd show 01a201a662ed02c196c5 --app shop:app", "id  01a201a662ed02c196c5", 6),
        LogLines("ERROR shepherd.alerts: task 01a201a662ed02c196c5 needs an operator\n", 12),
    ]
    assert [block.info for block in code_blocks(PAGE)] == ["console", "text"]


def test_ids_map_to_the_runs_ids_in_order_of_appearance() -> None:
    norm = Normaliser()
    assert norm.page("01a201a662ed02c196c5") == norm.run("01a208d5f99544c4fe7c") == "<id1>"
    assert norm.command("show 01a201a662ed02c196c5") == "show 01a208d5f99544c4fe7c"
    # The page shows the same id again where the run printed another one: a difference.
    assert norm.page("01a201a662ed02c196c5") != norm.run("01a208d6011556a2c847")


def test_the_page_may_not_use_an_id_no_output_showed() -> None:
    with pytest.raises(AssertionError, match="before any output shows it"):
        Normaliser().command("show 01a201a662ed02c196c5")


def test_times_instances_and_column_widths_are_forgiven() -> None:
    norm = Normaliser()
    page = (
        '2026-11-22 05:06:51Z  claimed   {"owner":"laptop:41230:6828/s","lock_epoch":1}\n'
        "shepherd ready: roles=agent instance=laptop:41230:6828\n"
        "2026-11-22 05:06:51,123 ERROR x: at 2026-11-22T05:06:51.123456+00:00   \n\n"
    )
    run = (
        '2026-11-23 14:36:12Z  claimed  {"owner":"a-much-longer-host:4123077:0f3e/s","lo…\n'
        "shepherd ready: roles=agent instance=vm:7:beef\n"
        "2026-11-23 14:36:12,999 ERROR x: at 2026-11-23T14:36:12.000001+00:00\n"
    )
    assert norm.page(page) == norm.run(run)


def test_an_instant_a_column_cut_short_is_forgiven_whatever_the_hour() -> None:
    norm = Normaliser()
    assert norm.page("1  forward  compensated  2026-11-23 1…") == norm.run(
        "1  forward  compensated  2026-11-24 2…"
    )
    assert norm.page("ends 2026-11-23 1…") != norm.run("ends 2026-11-23")


def test_an_instant_of_today_is_a_time_whatever_its_day() -> None:
    norm = Normaliser()
    page = "  1  forward  inventory.reserve  completed  1  14:36:21Z"
    assert norm.page(page) == norm.run("  1  forward  inventory.reserve  completed  1  09:02:59Z")
    assert norm.page(page) == norm.run(
        "  1  forward  inventory.reserve  completed  1  2026-11-24 00:00:01Z"
    )
    assert norm.page("at 14:36") == norm.run("at 14:36")  # not an instant: it must match
    assert norm.page("at 14:36") != norm.run("at 14:37")


def test_everything_else_must_match() -> None:
    norm = Normaliser()
    assert norm.page("task A-1: pending") != norm.run("task A-1: processing")
    assert norm.page("2 tasks") != norm.run("3 tasks")
    assert norm.page("a\nb") != norm.run("a\n\nb")
