"""JSON-only encoding and decoding of payloads, with the limits every store applies.

Payloads are JSON, never pickle: a queue row must not be able to run code. Both
backends get the same checks, so a payload SQLite accepts PostgreSQL accepts too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from typing import Any

from shepherd.core.records import JsonValue
from shepherd.errors import PayloadError

__all__ = ["MAX_DEPTH", "MAX_PAYLOAD_BYTES", "JsonValue", "check_text", "dumps", "loads"]

#: Default limit on an encoded payload, in bytes of UTF-8.
MAX_PAYLOAD_BYTES = 1024 * 1024
#: Deepest nesting of arrays and objects accepted (a scalar has depth 0).
MAX_DEPTH = 64

_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))

# Keeps only brackets, as "[" and "]"; deletes every other ASCII character.
_BRACKETS_ONLY = str.maketrans(
    {**dict.fromkeys(range(128)), ord("{"): "[", ord("["): "[", ord("}"): "]", ord("]"): "]"}
)
# `\u0000` preceded by an even number of backslashes, i.e. a real escape.
_NUL_ESCAPE = re.compile(r"(?:^|[^\\])(?:\\\\)*\\u0000")
# The types the encoder writes as they are: nothing inside them to check.
_SCALARS = frozenset({str, int, float, bool, type(None)})
# A sequence at least this long is first checked for containers in one C-speed pass.
_SCAN_AT = 32


def dumps(value: JsonValue, *, limit: int = MAX_PAYLOAD_BYTES) -> str:
    """Encode a value as compact JSON text.

    Args:
        value: Nested dicts, lists, strings, numbers, booleans and None.
        limit: The largest accepted encoding, in bytes of UTF-8.

    Returns:
        The JSON text.

    Raises:
        PayloadError: The value is not JSON (a set, an object, NaN or Infinity, a
            circular reference, two keys of one dict that JSON writes alike, such
            as `1` and `"1"`), a string or a key holds a NUL character or a lone
            surrogate, it is nested deeper than MAX_DEPTH, or its encoding is over
            `limit`.
    """
    try:
        text = _ENCODER.encode(value)
    except RecursionError:
        raise PayloadError(f"payload is nested deeper than {MAX_DEPTH} levels") from None
    except TypeError as exc:
        raise PayloadError(f"payload is not JSON: {exc}") from None
    except ValueError as exc:
        problem = str(exc)
        if problem.startswith("Out of range float"):
            problem = "it contains NaN or Infinity, which JSON cannot carry"
        elif problem.startswith("Circular reference"):
            problem = "it contains a circular reference"
        raise PayloadError(f"payload is not JSON: {problem}") from None
    _check_size(text, limit)
    _check_content(text)
    # Only an object can hold keys; the walk is safe now that the depth is checked.
    if "{" in text and (clash := _key_clash(value)) is not None:
        raise PayloadError(f"payload is not JSON: {clash}")
    return text


def check_text(name: str, value: object) -> None:
    """Refuse a text argument (a task's key, a reply queue) that a store cannot keep as is.

    Args:
        name: The argument's name, for the message.
        value: Its value: a str, or None for "not given".

    Raises:
        PayloadError: `value` is not a str, or holds a lone surrogate (not
            valid UTF-8) or a NUL character (which PostgreSQL rejects).
    """
    if value is None:
        return
    if not isinstance(value, str):
        raise PayloadError(f"{name} must be a str, not {type(value).__name__}")
    if "\x00" in value:
        raise PayloadError(f"{name} contains a NUL character, which PostgreSQL rejects")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise PayloadError(
                f"{name} contains a lone surrogate {value[exc.start]!r} at position "
                f"{exc.start}, which is not valid UTF-8"
            ) from None


def loads(text: str | bytes, *, limit: int = MAX_PAYLOAD_BYTES) -> JsonValue:
    """Decode JSON text, checking its size and nesting before parsing it.

    Args:
        text: JSON text, as a string or UTF-8 bytes.
        limit: The largest accepted input, in bytes of UTF-8.

    Returns:
        The decoded value.

    Raises:
        PayloadError: The input is over `limit`, nested deeper than MAX_DEPTH,
            holds a `\\u0000` escape, is not UTF-8, or is not valid JSON (NaN and
            Infinity included).
    """
    if isinstance(text, bytes | bytearray):
        if len(text) > limit:
            raise PayloadError(_over_limit(len(text), limit))
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise PayloadError(f"malformed JSON: not UTF-8 ({exc.reason})") from None
    else:
        _check_size(text, limit)
    _check_content(text)
    try:
        return _DECODER.decode(text)
    except PayloadError:
        raise
    except ValueError as exc:
        raise PayloadError(f"malformed JSON: {exc}") from None


def _reject_constant(name: str) -> JsonValue:
    raise PayloadError(f"malformed JSON: {name} is not a JSON value")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def _check_size(text: str, limit: int) -> None:
    if text.isascii():
        size = len(text)
    elif len(text) > limit:
        # Every character takes at least one byte: no need to encode to know.
        size = len(text)
    else:
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError as exc:
            near = text[max(exc.start - 30, 0) : exc.start + 1]
            raise PayloadError(
                f"payload contains a lone surrogate {text[exc.start]!r} (at {near!r}), "
                "which is not valid UTF-8"
            ) from None
    if size > limit:
        raise PayloadError(_over_limit(size, limit))


def _check_content(text: str) -> None:
    # PostgreSQL's jsonb rejects \u0000; refuse it on every backend alike.
    if "\\u0000" in text and _NUL_ESCAPE.search(text):
        raise PayloadError("payload contains a NUL character (\\u0000), which PostgreSQL rejects")
    if _too_deep(text):
        raise PayloadError(f"payload is nested deeper than {MAX_DEPTH} levels")


def _key_clash(value: object) -> str | None:
    """Two keys of one dict that JSON writes alike (`1` and `"1"`), described; or None.

    The encoder writes such keys twice and a reader keeps only the last: the
    other value would be lost without a word. Only a dict with a key that is
    not a str can clash, so only such a dict is compared key by key; elsewhere
    the walk reads nothing but types, and skips long runs of scalars at C speed.
    """
    if isinstance(value, dict):
        for key in value:
            if type(key) is not str:
                clash = _clash_in(value)
                if clash is not None:
                    return clash
                break
        children: Collection[object] = value.values()
    elif isinstance(value, list | tuple):
        children = value
    else:
        return None
    if len(children) >= _SCAN_AT and _SCALARS.issuperset(map(type, children)):
        return None
    for child in children:
        if type(child) not in _SCALARS:
            clash = _key_clash(child)
            if clash is not None:
                return clash
    return None


def _clash_in(mapping: dict[Any, object]) -> str | None:
    seen: dict[str, object] = {}
    for key in mapping:
        text = _key_text(key)
        if text in seen:
            return (
                f"keys {seen[text]!r} and {key!r} of one object would both be "
                f'"{text}" in JSON, and one value would be lost'
            )
        seen[text] = key
    return None


def _key_text(key: object) -> str:
    """The text the JSON encoder writes for a dict key."""
    if isinstance(key, str):
        return str.__str__(key)
    if key is True:
        return "true"
    if key is False:
        return "false"
    if key is None:
        return "null"
    if isinstance(key, float):
        return float.__repr__(key)
    if isinstance(key, int):
        return int.__repr__(key)
    return repr(key)  # pragma: no cover - the encoder refuses other keys


def _too_deep(text: str) -> bool:
    """Whether brackets outside strings nest deeper than MAX_DEPTH.

    Every step is a C-speed pass over the text, and there are at most MAX_DEPTH
    of them, so hostile input costs O(n) and never recurses.
    """
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return False
    if "\\" in text:
        # Drop escaped backslashes, then escaped quotes: every `"` left delimits a string.
        text = text.replace("\\\\", "").replace('\\"', "")
    brackets = "".join(text.split('"')[::2]).translate(_BRACKETS_ONLY)
    # Each pass removes the innermost groups, so a group left after MAX_DEPTH
    # passes is nested deeper than that.
    for _ in range(MAX_DEPTH):
        reduced = brackets.replace("[]", "")
        if len(reduced) == len(brackets):
            break
        brackets = reduced
    else:
        if "[]" in brackets:
            return True
    # What is left is unmatched (malformed input): refuse a long run of openers,
    # which a recursive parser would follow.
    return brackets.count("[") > MAX_DEPTH


def _over_limit(size: int, limit: int) -> str:
    shown, shown_limit = _human(size), _human(limit)
    if shown == shown_limit:
        shown, shown_limit = f"{size} bytes", f"{limit} bytes"
    return f"payload is {shown}, over the {shown_limit} limit"


def _human(size: int) -> str:
    for unit, scale in (("MiB", 1024 * 1024), ("KiB", 1024)):
        if size >= scale:
            text = f"{size / scale:.1f}".removesuffix(".0")
            return f"{text} {unit}"
    return f"{size} bytes"
