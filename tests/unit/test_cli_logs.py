"""`configure_logging`: shepherd's loggers at --log-level, the others at WARNING unless told;
`--log-format json` lines."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from shepherd.console.logs import configure_logging, parse_level_for
from shepherd.errors import ConfigError
from shepherd.tasklog import task_event

NAMES = ("", "shepherd", "httpx", "httpcore", "shepherd.store")


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    """Where the lines go; the loggers' levels and the root's handlers restored after."""
    saved = {name: logging.getLogger(name).level for name in NAMES}
    handlers = list(logging.getLogger().handlers)
    yield io.StringIO()
    root = logging.getLogger()
    for handler in [h for h in root.handlers if h not in handlers]:
        root.removeHandler(handler)
    for name, level in saved.items():
        logging.getLogger(name).setLevel(level)


def emit() -> None:
    logging.getLogger("httpx").info('HTTP Request: POST http://svc/charge "HTTP/1.1 200 OK"')
    logging.getLogger("httpx").warning("httpx warns")
    logging.getLogger("shepherd.tasks").info("task 1 hello: processed")
    logging.getLogger("shepherd.store").debug("store debug")


def test_third_party_info_is_hidden_by_default(stream: io.StringIO) -> None:
    configure_logging("info", stream=stream)
    emit()

    text = stream.getvalue()
    assert "HTTP Request" not in text
    assert "WARNING httpx: httpx warns" in text
    assert "INFO shepherd.tasks: task 1 hello: processed" in text
    assert "store debug" not in text


def test_a_level_per_logger(stream: io.StringIO) -> None:
    configure_logging("warning", [("httpx", "info"), ("shepherd.store", "DEBUG")], stream=stream)
    emit()

    text = stream.getvalue()
    assert "INFO httpx: HTTP Request" in text
    assert "DEBUG shepherd.store: store debug" in text
    assert "task 1 hello" not in text


def test_calling_again_replaces_the_handler(stream: io.StringIO) -> None:
    configure_logging("info", stream=io.StringIO())
    configure_logging("info", stream=stream)
    logging.getLogger("shepherd").info("once")

    assert stream.getvalue().count("once") == 1


@pytest.mark.parametrize(
    ("text", "expected"),
    [("httpx=info", ("httpx", "info")), (" shepherd.store = DEBUG ", ("shepherd.store", "debug"))],
)
def test_parse_level_for(text: str, expected: tuple[str, str]) -> None:
    assert parse_level_for(text) == expected


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("httpx", "'httpx' is not NAME=LEVEL"),
        ("=info", "'=info' is not NAME=LEVEL"),
        ("httpx=loud", "unknown level 'loud'"),
    ],
)
def test_parse_level_for_refuses(text: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        parse_level_for(text)


def test_an_unknown_level_is_refused(stream: io.StringIO) -> None:
    with pytest.raises(ConfigError, match="unknown level 'loud'"):
        configure_logging("loud", stream=stream)


def test_json_lines_have_the_record_and_its_task_fields(stream: io.StringIO) -> None:
    configure_logging("info", stream=stream, log_format="json")
    task_event("01a2", "orders.pay", "claimed", "lock_epoch 3", epoch=3)
    logging.getLogger("shepherd.agent").warning("two\nlines", extra={"seq": 2})
    try:
        raise ValueError("boom")
    except ValueError:
        logging.getLogger("shepherd.scheduler").exception("failed")

    claimed, two, failed = (json.loads(line) for line in stream.getvalue().splitlines())
    assert claimed == {
        "time": claimed["time"],
        "level": "INFO",
        "logger": "shepherd.tasks",
        "message": "task 01a2 orders.pay: claimed: lock_epoch 3",
        "task_id": "01a2",
        "workflow": "orders.pay",
        "seq": None,
        "agent": None,
        "attempt": None,
        "epoch": 3,
        "event": "claimed",
    }
    instant = datetime.fromisoformat(claimed["time"])
    assert claimed["time"].endswith("Z")
    assert instant.utcoffset() == timedelta(0)
    assert (two["message"], two["seq"], two["level"]) == ("two\nlines", 2, "WARNING")
    assert "exception" not in two
    assert failed["level"] == "ERROR"
    assert failed["exception"].startswith("Traceback (most recent call last):")
    assert failed["exception"].endswith("ValueError: boom")


def test_a_value_json_cannot_hold_is_written_as_text(stream: io.StringIO) -> None:
    configure_logging("info", stream=stream, log_format="json")
    at = datetime(2026, 1, 2, tzinfo=UTC)
    logging.getLogger("shepherd").info("at", extra={"at": at})

    assert json.loads(stream.getvalue())["at"] == str(at)


def test_the_text_format_does_not_show_the_fields(stream: io.StringIO) -> None:
    configure_logging("info", stream=stream)
    task_event("01a2", "orders.pay", "processed", epoch=3)

    assert (
        stream.getvalue().rstrip().endswith("INFO shepherd.tasks: task 01a2 orders.pay: processed")
    )


def test_an_unknown_format_is_refused(stream: io.StringIO) -> None:
    with pytest.raises(ConfigError, match="unknown log format 'xml'"):
        configure_logging("info", stream=stream, log_format="xml")


def test_a_line_is_valid_json_whatever_the_extra_fields_hold(stream: io.StringIO) -> None:
    configure_logging("info", stream=stream, log_format="json")
    cycle: list[object] = []
    cycle.append(cycle)
    logging.getLogger("shepherd").info(
        "odd", extra={"ratio": float("nan"), "by_pair": {(1, 2): "x"}, "cycle": cycle, "n": 0.5}
    )

    line = json.loads(stream.getvalue())
    assert (line["message"], line["n"], line["ratio"]) == ("odd", 0.5, "nan")
    assert line["by_pair"] == "{(1, 2): 'x'}"
    assert line["cycle"] == "[[...]]"
