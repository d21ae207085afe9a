from __future__ import annotations

import json
from collections import defaultdict

import pytest

from shepherd.errors import PayloadError
from shepherd.payloads import (
    ERROR_FIELD_CHARS,
    MAX_DEPTH,
    MAX_PAYLOAD_BYTES,
    check_text,
    dumps,
    dumps_detail,
    dumps_error,
    load_stored,
    loads,
)


def _nested(depth: int) -> object:
    value: object = 1
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        0,
        -12,
        1.5,
        "",
        "héllo ☃ 𝄞",
        'quote " backslash \\ brackets [{',
        "a literal \\u0000 is fine",
        [],
        {},
        {"order": {"id": "o-1", "items": [{"sku": "x", "qty": 2}], "paid": False}},
    ],
)
def test_round_trip(value: object) -> None:
    assert loads(dumps(value)) == value
    assert loads(dumps(value).encode()) == value


def test_dumps_is_compact_and_keeps_unicode() -> None:
    assert dumps({"a": [1, 2], "b": "é"}) == '{"a":[1,2],"b":"é"}'


def test_size_limit_counts_utf8_bytes() -> None:
    text = dumps("é" * 10)  # 20 bytes of content plus 2 quotes
    assert len(text.encode()) == 22
    assert dumps("é" * 10, limit=22) == text
    with pytest.raises(PayloadError, match="over the 21 bytes limit"):
        dumps("é" * 10, limit=21)


def test_size_limit_message_is_readable() -> None:
    big = "x" * int(2.3 * MAX_PAYLOAD_BYTES)
    with pytest.raises(PayloadError, match=r"^payload is 2\.3 MiB, over the 1 MiB limit$"):
        dumps(big)
    with pytest.raises(PayloadError, match="over the 1 MiB limit"):
        loads(json.dumps(big))


def test_size_just_over_the_limit_is_shown_in_bytes() -> None:
    with pytest.raises(PayloadError, match="payload is 1048577 bytes, over the 1048576 bytes"):
        dumps("x" * (MAX_PAYLOAD_BYTES - 1))


def test_loads_checks_size_before_parsing() -> None:
    with pytest.raises(PayloadError, match="over the 10 bytes limit"):
        loads("[" * 1000, limit=10)
    with pytest.raises(PayloadError, match="over the 10 bytes limit"):
        loads(b"not json at all", limit=10)


def test_depth_limit_is_exact() -> None:
    assert loads(dumps(_nested(MAX_DEPTH))) == _nested(MAX_DEPTH)
    with pytest.raises(PayloadError, match=f"nested deeper than {MAX_DEPTH}"):
        dumps(_nested(MAX_DEPTH + 1))
    with pytest.raises(PayloadError, match=f"nested deeper than {MAX_DEPTH}"):
        loads(json.dumps(_nested(MAX_DEPTH + 1)))


def test_absurd_nesting_never_reaches_the_parser() -> None:
    deep = 100_000
    with pytest.raises(PayloadError, match="nested deeper"):
        dumps(_nested(deep))
    with pytest.raises(PayloadError, match="nested deeper"):
        loads("[" * deep + "]" * deep)
    with pytest.raises(PayloadError, match="nested deeper"):
        loads("[" * deep)  # malformed too, but depth is checked first


def test_brackets_inside_strings_do_not_count() -> None:
    value = ["[" * 1000, "{" * 1000, 'x\\"' + "[" * 100]
    assert loads(dumps(value)) == value


def test_wide_but_shallow_payload_is_fine() -> None:
    value = [[i] for i in range(10_000)]
    assert loads(dumps(value)) == value


@pytest.mark.parametrize("value", ["a\x00b", {"k\x00": 1}, ["ok", ["\x00"]]])
def test_nul_is_rejected(value: object) -> None:
    with pytest.raises(PayloadError, match="NUL"):
        dumps(value)


def test_nul_escape_is_rejected_by_loads() -> None:
    with pytest.raises(PayloadError, match="NUL"):
        loads('["a\\u0000"]')
    with pytest.raises(PayloadError, match="NUL"):
        loads('"\\\\\\u0000"')  # an escaped backslash, then a real \u0000
    assert loads('"\\\\u0000"') == "\\u0000"  # an escaped backslash, then text


@pytest.mark.parametrize("value", [float("nan"), float("inf"), [1.0, float("-inf")]])
def test_nan_and_infinity_are_rejected(value: object) -> None:
    with pytest.raises(PayloadError, match="NaN or Infinity"):
        dumps(value)


@pytest.mark.parametrize("text", ["NaN", "[Infinity]", '{"a": -Infinity}'])
def test_loads_rejects_nan_and_infinity(text: str) -> None:
    with pytest.raises(PayloadError, match="is not a JSON value"):
        loads(text)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ({1, 2}, "Object of type set is not JSON serializable"),
        (object(), "Object of type object"),
        ({("a",): 1}, "keys must be"),
        (b"bytes", "Object of type bytes"),
    ],
)
def test_non_json_types_are_rejected(value: object, problem: str) -> None:
    with pytest.raises(PayloadError, match=f"payload is not JSON: {problem}"):
        dumps(value)


def test_circular_reference_is_rejected() -> None:
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(PayloadError, match="circular reference"):
        dumps(loop)


def test_lone_surrogate_is_rejected() -> None:
    with pytest.raises(PayloadError, match="lone surrogate"):
        dumps("\ud800")


@pytest.mark.parametrize(
    ("value", "near"),
    [
        ({"name": "ab\udc00cd"}, """'{"name":"ab\\udc00'"""),
        ({"k\ud800": 1}, """'{"k\\ud800'"""),  # in a key
        ([1, {"deep": ["\udfff"]}], """'[1,{"deep":["\\udfff'"""),
    ],
)
def test_lone_surrogate_is_named_with_where_it_is(value: object, near: str) -> None:
    with pytest.raises(PayloadError) as caught:
        dumps(value)
    assert str(caught.value).startswith("payload contains a lone surrogate '\\u")
    assert f"(at {near}), which is not valid UTF-8" in str(caught.value)


def test_a_valid_surrogate_pair_is_fine() -> None:
    assert loads(dumps({"clef": "\U0001d11e"})) == {"clef": "\U0001d11e"}


@pytest.mark.parametrize(
    ("value", "keys"),
    [
        ({1: "a", "1": "b"}, """keys 1 and '1' of one object would both be "1" in JSON"""),
        ({"1": "a", 1: "b"}, """keys '1' and 1 of one object would both be "1" in JSON"""),
        ({True: 1, "true": 2}, """keys True and 'true' of one object would both be "true" """),
        ({None: 1, "null": 2}, """keys None and 'null' of one object would both be "null" """),
        ({2.5: 1, "2.5": 2}, """keys 2.5 and '2.5' of one object would both be "2.5" """),
        ({"ok": [{"x": {7: 1, "7": 2}}]}, "keys 7 and '7'"),  # nested in lists and dicts
        ((0, [1] * 40, {3: 1, "3": 2}), "keys 3 and '3'"),  # past a long list of scalars
        (defaultdict(int, {4: 1, "4": 2}), "keys 4 and '4'"),  # a dict subclass
    ],
)
def test_keys_that_collide_in_json_are_rejected(value: object, keys: str) -> None:
    with pytest.raises(PayloadError) as caught:
        dumps(value)
    message = str(caught.value)
    assert message.startswith("payload is not JSON: ")
    assert keys in message
    assert message.endswith("and one value would be lost")


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ({1: "a", 2: "b"}, '{"1":"a","2":"b"}'),
        ({1: "a", "2": "b", None: "c", False: "d"}, '{"1":"a","2":"b","null":"c","false":"d"}'),
        (
            {1: {"1": "inner objects are other objects"}},
            '{"1":{"1":"inner objects are other objects"}}',
        ),
        ({1.0: "a", "1": "b"}, '{"1.0":"a","1":"b"}'),  # a float key is written as a float
        (["{1: 'a', '1': 'b'} in a string"], "[\"{1: 'a', '1': 'b'} in a string\"]"),
    ],
)
def test_non_string_keys_that_stay_distinct_are_fine(value: object, text: str) -> None:
    assert dumps(value) == text


@pytest.mark.parametrize("name", ["key", "reply_to"])
def test_check_text_accepts_text_and_none(name: str) -> None:
    check_text(name, None)
    check_text(name, "order-1 ☃ 𝄞")


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (12, "key must be a str, not int"),
        (b"order-1", "key must be a str, not bytes"),
        (
            "order-\ud800",
            "key contains a lone surrogate '\\ud800' at position 6, which is not valid UTF-8",
        ),
        ("a\x00b", "key contains a NUL character, which PostgreSQL rejects"),
    ],
)
def test_check_text_names_the_argument_and_the_problem(value: object, problem: str) -> None:
    with pytest.raises(PayloadError) as caught:
        check_text("key", value)
    assert str(caught.value) == problem


@pytest.mark.parametrize("text", ["", "{", '{"a" 1}', "[1,]", "'single'", '"unterminated'])
def test_malformed_json(text: str) -> None:
    with pytest.raises(PayloadError, match=r"^malformed JSON: "):
        loads(text)


def test_invalid_utf8_bytes() -> None:
    with pytest.raises(PayloadError, match="malformed JSON: not UTF-8"):
        loads(b'"\xff"')


def test_quadratic_input_is_handled_quickly() -> None:
    # Unterminated strings full of escaped quotes would make a naive regex quadratic.
    text = '"' + '\\"' * 200_000 + "[" * 100
    with pytest.raises(PayloadError, match="malformed JSON"):
        loads(text)


# -- error bodies: cut to size, never refused ------------------------------------
LIMIT = 64 * 1024


def _cut(error: object, limit: int = LIMIT) -> dict[str, object]:
    text = dumps_error(error, limit=limit)
    assert len(text.encode()) <= limit
    value = loads(text, limit=limit)  # valid JSON that every check accepts
    assert isinstance(value, dict)
    return value


def test_an_error_within_the_limit_is_kept_as_it_is() -> None:
    error = {"type": "ValueError", "message": "no", "detail": {"code": 7}}
    assert dumps_error(error, limit=LIMIT) == dumps(error)


def test_a_huge_message_is_cut_and_marked() -> None:
    body = _cut({"type": "ValueError", "message": "m" * (10 * 1024 * 1024), "seq": 3})
    assert body["truncated"] is True
    assert body["type"] == "ValueError"
    assert body["seq"] == 3
    message = str(body["message"])
    assert message.startswith("m" * ERROR_FIELD_CHARS)
    assert message.endswith(f"... [{10 * 1024 * 1024 - ERROR_FIELD_CHARS} characters cut]")


def test_a_huge_traceback_keeps_its_end() -> None:
    traceback = "frame\n" * 1_000_000 + "ValueError: the cause"
    body = _cut({"type": "ValueError", "message": "bad", "traceback": traceback, "bug": True})
    assert body["truncated"] is True
    assert (body["type"], body["message"], body["bug"]) == ("ValueError", "bad", True)
    assert str(body["traceback"]).startswith("[")
    assert str(body["traceback"]).endswith("ValueError: the cause")
    assert len(str(body["traceback"])) < 3 * ERROR_FIELD_CHARS


def test_a_huge_nested_detail_becomes_cut_text() -> None:
    detail = {"rows": [{"id": i, "text": "x" * 100} for i in range(100_000)]}
    body = _cut({"reason": "refused", "agent": "charge", "detail": detail})
    assert (body["reason"], body["agent"], body["truncated"]) == ("refused", "charge", True)
    assert isinstance(body["detail"], str)
    assert body["detail"].startswith('{"rows":[{"id":0,')
    assert body["detail"].endswith("characters cut]")


def test_cuts_shrink_until_the_body_fits_a_small_limit() -> None:
    body = _cut({"type": "E" * 5000, "message": "m" * 5000, "traceback": "t" * 5000}, limit=300)
    assert body["truncated"] is True
    assert set(body) == {"type", "message", "traceback", "truncated"}


def test_many_fields_are_dropped_before_the_main_ones() -> None:
    error: dict[str, object] = {f"field{i}": "v" * 1000 for i in range(1000)}
    error["message"] = "kept"
    body = _cut(error, limit=2000)
    assert body["message"] == "kept"
    assert body["truncated"] is True


def test_an_error_that_is_not_an_object_becomes_a_message() -> None:
    body = _cut("boom " * 1_000_000)
    assert str(body["message"]).startswith("boom boom")
    assert body["truncated"] is True


def test_a_limit_too_small_for_anything_still_gives_the_marker() -> None:
    assert dumps_error({"message": "x" * 100}, limit=5) == '{"truncated":true}'


def test_nul_in_an_error_is_replaced_not_refused() -> None:
    body = _cut({"type": "E\x00", "message": "a\x00b", "k\x00": ["\x00"]})
    assert body == {"type": "E\ufffd", "message": "a\ufffdb", "k\ufffd": ["\ufffd"]}


def test_nul_in_a_huge_error_is_replaced_and_the_error_cut() -> None:
    body = _cut({"message": "\x00" * (2 * LIMIT)})
    assert str(body["message"]).startswith("\ufffd" * 10)
    assert body["truncated"] is True


def test_non_ascii_is_counted_in_bytes_and_kept() -> None:
    body = _cut({"type": "Ошибка", "message": "☃𝄞é" * 100_000}, limit=4000)
    assert body["type"] == "Ошибка"
    assert str(body["message"]).startswith("☃𝄞é☃𝄞é")
    assert body["truncated"] is True


def test_lone_surrogates_are_replaced() -> None:
    assert _cut({"message": "a\ud800b"}) == {"message": "a\ufffdb"}


def test_what_json_cannot_carry_becomes_text() -> None:
    loop: list[object] = []
    loop.append(loop)

    class Broken:
        def __repr__(self) -> str:
            raise RuntimeError("no repr")

    body = _cut(
        {
            "nan": float("nan"),
            "set": {1},
            "loop": loop,
            "deep": _nested(200),
            1: "one",
            "1": "other one",
            "broken": Broken(),
            "big": 10**5000,
        }
    )
    assert body["nan"] == "nan"
    assert body["set"] == "{1}"
    assert body["loop"] == ["<circular reference>"]
    assert isinstance(body["deep"], list)  # kept down to MAX_DEPTH, then text
    assert {body["1"], body["1'"]} == {"one", "other one"}
    assert body["broken"] == "<unprintable Broken>"
    assert str(body["big"]).startswith("<an integer of")


def test_dumps_detail_embeds_encoded_values_without_encoding_them_again() -> None:
    error = dumps_error({"message": "x" * 100}, limit=60)
    text = dumps_detail({"seq": 1}, error=error)
    assert loads(text) == {"seq": 1, "error": loads(error)}
    assert dumps_detail({}, result="[1,2]") == '{"result":[1,2]}'
    assert dumps_detail(["a", "b"]) == '["a","b"]'


def test_dumps_detail_checks_like_dumps_but_has_no_size_limit() -> None:
    assert len(dumps_detail("x" * (2 * MAX_PAYLOAD_BYTES))) == 2 * MAX_PAYLOAD_BYTES + 2
    with pytest.raises(PayloadError, match="NUL"):
        dumps_detail({"owner": "a\x00"})
    with pytest.raises(TypeError):
        dumps_detail([1], error="{}")


def test_load_stored_has_no_limit() -> None:
    assert load_stored(None) is None
    assert load_stored(dumps_detail("x" * (2 * MAX_PAYLOAD_BYTES))) == "x" * (2 * MAX_PAYLOAD_BYTES)
