"""JSON-only encoding and decoding of payloads, with the limits every store applies.

Payloads are JSON, never pickle: a queue row must not be able to run code. Both
backends get the same checks, so a payload SQLite accepts PostgreSQL accepts too.
"""

from __future__ import annotations

import json
import re

from shepherd.core.records import JsonValue
from shepherd.errors import PayloadError

__all__ = ["MAX_DEPTH", "MAX_PAYLOAD_BYTES", "JsonValue", "dumps", "loads"]

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


def dumps(value: JsonValue, *, limit: int = MAX_PAYLOAD_BYTES) -> str:
    """Encode a value as compact JSON text.

    Args:
        value: Nested dicts, lists, strings, numbers, booleans and None.
        limit: The largest accepted encoding, in bytes of UTF-8.

    Returns:
        The JSON text.

    Raises:
        PayloadError: The value is not JSON (a set, an object, NaN or Infinity, a
            circular reference), a string holds a NUL character or a lone surrogate,
            it is nested deeper than MAX_DEPTH, or its encoding is over `limit`.
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
    return text


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
        except UnicodeEncodeError:
            raise PayloadError(
                "payload contains a lone surrogate, which is not valid UTF-8"
            ) from None
    if size > limit:
        raise PayloadError(_over_limit(size, limit))


def _check_content(text: str) -> None:
    # PostgreSQL's jsonb rejects \u0000; refuse it on every backend alike.
    if "\\u0000" in text and _NUL_ESCAPE.search(text):
        raise PayloadError("payload contains a NUL character (\\u0000), which PostgreSQL rejects")
    if _too_deep(text):
        raise PayloadError(f"payload is nested deeper than {MAX_DEPTH} levels")


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
