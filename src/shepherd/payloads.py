"""JSON-only encoding and decoding of payloads, with the limits every store applies.

Payloads are JSON, never pickle: a queue row must not be able to run code. Both
backends get the same checks, so a payload SQLite accepts PostgreSQL accepts too.
Every JSON value a store writes is encoded here: payloads with `dumps` (refused
when too large), errors with `dumps_error` (cut when too large, never refused: a
task must always be able to fail), the store's own details with `dumps_detail`.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Collection
from typing import Any

from shepherd.core.limits import KEY_BYTES, too_long
from shepherd.core.records import JsonValue
from shepherd.errors import PayloadError, TooLongError

__all__ = [
    "ERROR_FIELD_CHARS",
    "MAX_DEPTH",
    "MAX_PAYLOAD_BYTES",
    "JsonValue",
    "check_text",
    "dumps",
    "dumps_detail",
    "dumps_error",
    "load_stored",
    "loads",
]

#: Default limit on an encoded payload, in bytes of UTF-8.
MAX_PAYLOAD_BYTES = 1024 * 1024
#: Deepest nesting of arrays and objects accepted (a scalar has depth 0).
MAX_DEPTH = 64

#: Characters kept of each main field (reason, type, message...) of an error cut to size.
ERROR_FIELD_CHARS = 2000

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


def check_text(name: str, value: object, *, limit: int = KEY_BYTES) -> None:
    """Refuse a text argument (a task's key, a reply queue) that a store cannot keep as is.

    Args:
        name: The argument's name, for the message.
        value: Its value: a str, or None for "not given".
        limit: Its longest accepted value, in bytes of UTF-8 (`shepherd.core.limits`).

    Raises:
        PayloadError: `value` is not a str, is longer than `limit`, or holds a
            lone surrogate (not valid UTF-8) or a NUL character (which
            PostgreSQL rejects).
    """
    if value is None:
        return
    if not isinstance(value, str):
        raise PayloadError(f"{name} must be a str, not {type(value).__name__}")
    if (problem := too_long(name, value, limit)) is not None:
        raise TooLongError(name, problem)
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


def dumps_error(value: JsonValue, *, limit: int = MAX_PAYLOAD_BYTES) -> str:
    """Encode an error body as JSON text: cut to fit `limit`, never refused.

    A task must always be able to fail, so an error that `dumps` would refuse
    is repaired instead. A NUL character or a lone surrogate becomes U+FFFD; a
    value JSON cannot carry (NaN, a set, an object) becomes its repr; a
    circular reference or nesting deeper than MAX_DEPTH becomes a string. If
    the encoding is still over `limit`, the main fields (`reason`, `type`,
    `message`, `seq`, `agent`) are kept, cut to at most ERROR_FIELD_CHARS
    characters each; the others (a `traceback`, a `detail`) become text cut to
    twice that (a traceback keeps its end, which names the exception); the
    cuts shrink until the body fits, and `"truncated": true` is added. A value
    that is not an object is kept as the `message` of such a body.

    Args:
        value: The error: usually a dict such as `{"type": ..., "message": ...}`.
        limit: The largest encoding wanted, in bytes of UTF-8. Below a few dozen
            bytes even `{"truncated":true}` is over it, and is returned anyway.

    Returns:
        The JSON text.
    """
    try:
        return dumps(value, limit=limit)
    except PayloadError:
        pass
    clean = _repaired(value, 0, set())
    text = _ENCODER.encode(clean)
    if _utf8_size(text) <= limit:
        return text
    return _cut_error(clean if isinstance(clean, dict) else {"message": clean}, limit)


def dumps_detail(value: JsonValue, /, **embedded: str) -> str:
    """Encode a value the store writes of its own: an event's detail, a crash list, names.

    The store builds it of str keys, names, numbers and values already encoded,
    a few levels deep: it is checked for JSON, NUL characters and lone
    surrogates (which a name or a reason could carry), not for key clashes or
    depth, and has no size limit.

    Args:
        value: The value; a dict if `embedded` is given.
        **embedded: Members to add to the object, whose values are JSON text
            already encoded by this module (a result by `dumps`, an error by
            `dumps_error`): they are spliced in, not encoded again.

    Returns:
        The JSON text.

    Raises:
        PayloadError: `value` is not JSON, or holds a NUL or a lone surrogate.
        TypeError: `embedded` is given but `value` is not a dict.
    """
    try:
        text = _ENCODER.encode(value)
    except (TypeError, ValueError, RecursionError):
        text = dumps(value, limit=sys.maxsize)  # raises the PayloadError that says why
    # The store builds these objects itself, with str keys and a few levels:
    # only what a name or a reason inside could carry is checked (no key
    # clash, no depth walk), on the hot path of every step.
    if not text.isascii():
        _check_size(text, sys.maxsize)
    if "\\u0000" in text:
        _check_content(text)
    if not embedded:
        return text
    if not isinstance(value, dict):
        raise TypeError("only an object can embed members")
    members = ",".join(f"{_ENCODER.encode(key)}:{json_text}" for key, json_text in embedded.items())
    return f"{text[:-1]}{',' if value else ''}{members}}}"


def load_stored(text: str | None) -> JsonValue:
    """Decode JSON text a store wrote through this module; None stays None.

    It was checked when it was written, and may be over the payload limit (an
    event's detail that embeds a payload at the limit), so no limit applies.
    """
    return None if text is None else _STORED_DECODER.decode(text)


def _reject_constant(name: str) -> JsonValue:
    raise PayloadError(f"malformed JSON: {name} is not a JSON value")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)
_STORED_DECODER = json.JSONDecoder()


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


# -- error bodies ----------------------------------------------------------------
#: The fields of an error kept first, and cut the least, when it is too large.
_MAIN_FIELDS = ("reason", "type", "message", "seq", "agent")
#: Fields whose end matters more than their beginning.
_TAIL_FIELDS = frozenset({"traceback"})
#: Other fields kept in a cut error, at most (the others are counted, not kept).
_OTHER_FIELDS = 16
_REPLACEMENT = "\ufffd"
_SURROGATE = re.compile("[\ud800-\udfff]")


def _repaired(value: object, depth: int, path: set[int]) -> JsonValue:
    """`value` made encodable: what JSON cannot carry becomes text."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return float(value)
    if isinstance(value, str):
        return _clean_text(str.__str__(value))
    if isinstance(value, int) and not isinstance(value, bool):
        # Python refuses to write an integer of more than 4300 digits.
        bits = value.bit_length()
        return int(value) if bits < 4000 else f"<an integer of {bits} bits>"
    if isinstance(value, dict | list | tuple):
        if depth >= MAX_DEPTH - 1:
            return _clean_text(_cut_text(_repr(value), ERROR_FIELD_CHARS, tail=False))
        if id(value) in path:
            return "<circular reference>"
        path.add(id(value))
        try:
            if isinstance(value, dict):
                out: dict[str, JsonValue] = {}
                for key, item in value.items():
                    name = _clean_text(_key_text(key)) if _is_key(key) else _clean_text(_repr(key))
                    while name in out:  # two keys JSON writes alike: keep both values
                        name += "'"
                    out[name] = _repaired(item, depth + 1, path)
                return out
            return [_repaired(item, depth + 1, path) for item in value]
        finally:
            path.discard(id(value))
    return _clean_text(_cut_text(_repr(value), ERROR_FIELD_CHARS, tail=False))


def _repr(value: object) -> str:
    try:
        return repr(value)
    except Exception:  # an error body is never refused, even for a broken __repr__
        return f"<unprintable {type(value).__name__}>"


def _is_key(key: object) -> bool:
    return isinstance(key, str | int | float) or key is None


def _clean_text(text: str) -> str:
    if "\x00" in text:
        text = text.replace("\x00", _REPLACEMENT)
    if not text.isascii():
        # A str holds a pair as one code point: any surrogate in it is alone.
        text = _SURROGATE.sub(_REPLACEMENT, text)
    return text


def _cut_error(error: dict[str, JsonValue], limit: int) -> str:
    main = [key for key in _MAIN_FIELDS if key in error]
    others = [key for key in error if key not in _MAIN_FIELDS and key != "truncated"]
    dropped = len(others) - _OTHER_FIELDS
    others = others[:_OTHER_FIELDS]
    chars = ERROR_FIELD_CHARS
    while True:
        body: dict[str, JsonValue] = {key: _cut_field(error[key], chars, key) for key in main}
        for key in others:
            body[key] = _cut_field(error[key], 2 * chars, key)
        if dropped > 0:
            body["dropped_fields"] = dropped
        body["truncated"] = True
        text = _ENCODER.encode(body)
        if _utf8_size(text) <= limit:
            return text
        if chars == 0:
            break
        chars //= 2
    if others or dropped > 0:  # too many fields for the limit: the main ones only
        return _cut_error({key: error[key] for key in main}, limit)
    return '{"truncated":true}'


def _cut_field(value: JsonValue, chars: int, key: str) -> JsonValue:
    """A field of an error within about `chars` characters: as it is, or cut as text."""
    if isinstance(value, str):
        return _cut_text(value, chars, tail=key in _TAIL_FIELDS)
    if not isinstance(value, dict | list):
        return value
    text = _ENCODER.encode(value)
    return value if len(text) <= chars else _cut_text(text, chars, tail=key in _TAIL_FIELDS)


def _cut_text(text: str, chars: int, *, tail: bool) -> str:
    cut = len(text) - chars
    if cut <= 0:
        return text
    if tail:
        return f"[{cut} characters cut] ..." + text[cut:]
    return text[:chars] + f"... [{cut} characters cut]"


def _utf8_size(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8"))
