"""`configure_logging`: shepherd's loggers at --log-level, the others at WARNING unless told."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest

from shepherd.cli.logs import configure_logging, parse_level_for
from shepherd.errors import ConfigError

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
