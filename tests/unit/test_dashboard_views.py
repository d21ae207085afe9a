"""How the dashboard shows values, lays out its chart, reads its filters and frames its events."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from starlette.datastructures import QueryParams

from shepherd.core.overview import ThroughputBucket
from shepherd.core.states import ProcessState
from shepherd.dashboard.chart import HEIGHT, TOP, chart
from shepherd.dashboard.listing import Filters
from shepherd.dashboard.live import event_text
from shepherd.dashboard.pages import ENVIRONMENT
from shepherd.dashboard.views import duration, reason_line, shown_json, shown_store
from shepherd.errors import ConfigError
from shepherd.store.cursor import TaskCursor

START = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://shop:s3cret@db.example:5432/shop", "postgresql://shop@db.example:5432/shop"),
        ("postgresql://shop:s3cret@db/shop?password=other", "postgresql://shop@db/shop"),
        ("postgres://:s3cret@db/shop", "postgres://db/shop"),
        ("sqlite:///var/lib/shop.db", "sqlite:///var/lib/shop.db"),
    ],
)
def test_a_store_url_is_shown_without_its_password(url: str, shown: str) -> None:
    assert shown_store(url) == shown
    assert "s3cret" not in shown_store(url)


def test_a_large_value_is_cut_and_kept_whole_behind_show_all() -> None:
    small = shown_json({"a": 1})
    assert (small.preview, small.full) == ('{"a": 1}', None)
    big = shown_json({"items": list(range(500))}, limit=100)
    assert big.full is not None
    assert len(big.preview) == 101
    assert big.preview.endswith("…")
    assert big.full.startswith('{\n  "items": [')


def test_durations_read_at_a_glance() -> None:
    assert duration(None) == "—"
    assert duration(timedelta(milliseconds=850)) == "850 ms"
    assert duration(timedelta(seconds=12.34)) == "12.3 s"
    assert duration(timedelta(seconds=245)) == "4 min 5 s"
    assert duration(timedelta(hours=3, minutes=2)) == "3 h 2 min"


def test_every_template_escapes_what_it_shows() -> None:
    assert ENVIRONMENT.autoescape is True
    rendered = ENVIRONMENT.from_string("{{ value }}").render(value="<script>alert(1)</script>")
    assert rendered == "&lt;script&gt;alert(1)&lt;/script&gt;"


def test_the_chart_stacks_each_minute_under_the_busiest_one() -> None:
    buckets = [
        ThroughputBucket(start=START, processed=6, errors=2, cancelled=0),
        ThroughputBucket(start=START + timedelta(minutes=1), processed=0, errors=0, cancelled=0),
        ThroughputBucket(start=START + timedelta(minutes=2), processed=4, errors=0, cancelled=1),
    ]
    drawn = chart(buckets)
    assert (drawn.peak, drawn.processed, drawn.errors, drawn.cancelled) == (8, 10, 2, 1)
    assert [(b.kind, b.x) for b in drawn.bars] == [
        ("processed", 1.0),
        ("errors", 1.0),
        ("processed", 401.0),
        ("cancelled", 401.0),
    ]
    processed, errors = drawn.bars[0], drawn.bars[1]
    assert processed.y + processed.height == HEIGHT  # on the axis
    assert errors.y + errors.height == pytest.approx(processed.y)  # stacked on it
    assert errors.y == pytest.approx(TOP)  # the busiest minute fills the chart
    assert errors.title == "12:00 UTC: 2 errors"


def test_an_empty_hour_draws_no_bar() -> None:
    drawn = chart([ThroughputBucket(start=START, processed=0, errors=0, cancelled=0)])
    assert (drawn.bars, drawn.peak) == ((), 0)


def test_the_filters_read_from_the_url_and_write_the_next_page() -> None:
    cursor = TaskCursor(created_at=START, task_id="abc")
    query = QueryParams(
        "state=error&state=pending&workflow=orders&q=+order-7+&from=2030-01-01T11:00"
        f"&before={cursor.encode()}"
    )
    filters = Filters.parse(query)
    assert filters.states == (ProcessState.ERROR, ProcessState.PENDING)
    assert (filters.workflow, filters.key, filters.search) == ("orders", None, "order-7")
    assert filters.created_from == datetime(2030, 1, 1, 11, 0, tzinfo=UTC)
    assert filters.before == cursor
    assert filters.link(before=None) == (
        "/tasks?state=error&state=pending&workflow=orders&q=order-7&from=2030-01-01T11%3A00"
    )
    assert filters.link(before=cursor).endswith(f"&before={cursor.encode()}")


@pytest.mark.parametrize(
    ("given", "written"),
    [
        ("0001-01-01T00:00", "0001-01-01T00%3A00"),
        ("0001-01-01T00:00-14:00", "0001-01-01T14%3A00"),
        ("9999-12-31T23:59:59.999999", "9999-12-31T23%3A59%3A59.999999"),
        ("2030-01-01T11:00:05+01:00", "2030-01-01T10%3A00%3A05"),
    ],
)
def test_a_time_at_the_ends_of_the_calendar_is_written_as_it_reads_back(
    given: str, written: str
) -> None:
    filters = Filters.parse(QueryParams({"from": given}))
    link = filters.link(before=None)
    assert link == f"/tasks?from={written}"
    assert Filters.parse(QueryParams(link.partition("?")[2])) == filters


@pytest.mark.parametrize("given", ["0001-01-01T00:00+14:00", "9999-12-31T23:59-14:00"])
def test_a_time_out_of_range_in_utc_is_named(given: str) -> None:
    with pytest.raises(ConfigError, match="out of range in UTC") as raised:
        Filters.parse(QueryParams({"to": given}))
    assert raised.value.field == "to"


@pytest.mark.parametrize(
    ("query", "field"),
    [("state=sleeping", "state"), ("from=yesterday", "from"), ("before=nope", "cursor")],
)
def test_a_malformed_filter_is_named(query: str, field: str) -> None:
    with pytest.raises(ConfigError) as raised:
        Filters.parse(QueryParams(query))
    assert raised.value.field == field


def test_an_event_carries_each_line_of_its_html_as_data() -> None:
    assert event_text("refresh", "<p>\r\na</p>\nb") == (
        "event: refresh\ndata: <p>\ndata: a</p>\ndata: b\n\n"
    )


@pytest.mark.parametrize(
    ("error", "shown"),
    [
        (None, ""),
        ({"reason": "card declined\nTraceback (most recent call last):"}, "card declined"),
        ({"type": "KeyError", "message": "'name'", "bug": True}, "KeyError: 'name'"),
        ("boom\n  at line 2", "boom"),
        ({"reason": "x" * 300}, "x" * 99 + "…"),
    ],
)
def test_the_reason_column_shows_the_first_line_cut_to_size(error: object, shown: str) -> None:
    assert reason_line(error) == shown


def test_the_list_query_without_its_cursor_and_in_words() -> None:
    filters = Filters.parse(
        QueryParams("state=error&workflow=orders.process&before=1700000000000000.abc")
    )
    assert filters.query() == "state=error&workflow=orders.process"
    assert filters.described() == "state error, workflow orders.process"
    assert Filters.parse(QueryParams("")).described() == "every task"
