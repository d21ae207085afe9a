"""Binary dumpers for the one-dimensional arrays the store sends (`%b::text[]`, ...).

Batches send their rows as arrays (`unnest(%b::text[], ...)`), a list per
column, one statement per kind of operation. psycopg's own list dumper looks at
every list twice to pick its element type (and, for integers, the smallest that
fits) and dumps each element through a dumper of its own: for the one-row lists
of a lone step that cost more than the statement's round trip. Lists whose first
non-NULL element is a `str`, an `int` or a `float` are dumped here, in one pass,
as `text[]`, `int8[]` and `float8[]` (the statements cast them to the column's
type); anything else (an empty or all-NULL list, booleans, instants, nested
lists) goes to psycopg's dumper as before.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any, ClassVar

import psycopg
from psycopg import pq
from psycopg.adapt import PyFormat
from psycopg.types.array import BaseListDumper, ListBinaryDumper

if TYPE_CHECKING:
    from collections.abc import Callable

    from psycopg.abc import AdaptContext, Buffer, DumperKey

__all__ = ["ArrayDumper", "register"]

_HEAD = struct.Struct("!iiIii").pack  # dimensions, has NULLs, element oid, length, lower bound
_EMPTY = struct.Struct("!iiI").pack  # no dimension
_LENGTH = struct.Struct("!i").pack
_NULL = b"\xff\xff\xff\xff"  # length -1

_TEXT, _TEXT_ARRAY = 25, 1009
_INT8_OID, _INT8_ARRAY = 20, 1016
_FLOAT8_OID, _FLOAT8_ARRAY = 701, 1022


class _Array(BaseListDumper):
    """A one-dimensional array of one element type, dumped in one pass."""

    format = pq.Format.BINARY
    element: ClassVar[int]
    name: ClassVar[str]

    def dump(self, obj: list[Any]) -> Buffer | None:
        if not obj:
            return _EMPTY(0, 0, self.element)
        parts: list[bytes] = [b""]
        try:
            nulls = self._items(obj, parts.append)
        except (AttributeError, TypeError, struct.error, UnicodeError) as exc:
            kinds = sorted({type(item).__name__ for item in obj if item is not None})
            raise psycopg.DataError(
                f"a list of {', '.join(kinds)} cannot be sent as {self.name}[]: {exc}"
            ) from None
        parts[0] = _HEAD(1, nulls, self.element, len(obj), 1)
        return b"".join(parts)

    def _items(self, obj: list[Any], append: Callable[[bytes], None]) -> int:
        raise NotImplementedError


class _TextArray(_Array):
    oid = _TEXT_ARRAY
    element = _TEXT
    name = "text"
    encoding = "utf-8"

    def _items(self, obj: list[Any], append: Callable[[bytes], None]) -> int:
        nulls = 0
        encoding = self.encoding
        for item in obj:
            if item is None:
                nulls = 1
                append(_NULL)
                continue
            data = item.encode(encoding)
            if b"\x00" in data:
                raise psycopg.DataError("PostgreSQL text fields cannot contain NUL (0x00) bytes")
            append(_LENGTH(len(data)))
            append(data)
        return nulls


class _Packed(_Array):
    """An array of fixed-size elements: each packed with its length."""

    #: Each element: its length (8), then its value.
    layout: ClassVar[struct.Struct]

    def _items(self, obj: list[Any], append: Callable[[bytes], None]) -> int:
        nulls = 0
        pack = self.layout.pack
        for item in obj:
            if item is None:
                nulls = 1
                append(_NULL)
            else:
                append(pack(8, item))
        return nulls


class _Int8Array(_Packed):
    oid = _INT8_ARRAY
    element = _INT8_OID
    name = "int8"
    layout = struct.Struct("!iq")


class _Float8Array(_Packed):
    oid = _FLOAT8_ARRAY
    element = _FLOAT8_OID
    name = "float8"
    layout = struct.Struct("!id")


class _Nulls(BaseListDumper):
    """An empty or all-NULL list, as psycopg sends it: text, of a type the statement casts."""

    format = pq.Format.TEXT

    def dump(self, obj: list[Any]) -> Buffer | None:
        return b"{" + b",".join([b"NULL"] * len(obj)) + b"}"


#: The element types dumped here (exactly these: a bool is not an int here).
_FAST: dict[type, type[_Array]] = {str: _TextArray, int: _Int8Array, float: _Float8Array}
#: A list with no element to dump: its key.
_NO_ELEMENT = type(None)
#: The dumpers, shared by every statement (they keep no state): by element type
#: (`_NO_ELEMENT` for `_Nulls`) and text encoding.
_SHARED: dict[tuple[type, str], BaseListDumper] = {}


class ArrayDumper(ListBinaryDumper):
    """psycopg's binary list dumper, with one-pass dumpers for text, int8 and float8."""

    def get_key(self, obj: list[Any], format: PyFormat) -> DumperKey:
        kind = _kind(obj)
        return super().get_key(obj, format) if kind is None else (self.cls, kind, _Array)

    def upgrade(self, obj: list[Any], format: PyFormat) -> BaseListDumper:
        kind = _kind(obj)
        if kind is None:
            return super().upgrade(obj, format)
        connection = self.connection
        encoding = "utf-8" if connection is None else connection.info.encoding
        dumper = _SHARED.get((kind, encoding))
        if dumper is None:
            dumper = _Nulls(self.cls) if kind is _NO_ELEMENT else _FAST[kind](self.cls)
            if isinstance(dumper, _TextArray):
                dumper.encoding = encoding
            _SHARED[kind, encoding] = dumper
        return dumper


def _kind(obj: list[Any]) -> type | None:
    """The element type dumped here for `obj` (`_NO_ELEMENT`: none), or None for psycopg's."""
    for item in obj:
        if item is not None:
            kind = type(item)
            if kind is int and float in set(map(type, obj)):
                return float  # integers and floats (a float field given as 30): float8
            return kind if kind in _FAST else None
    return _NO_ELEMENT


def register(context: AdaptContext) -> None:
    """Dump lists sent in binary (`%b`) with `ArrayDumper` on `context` (a connection)."""
    context.adapters.register_dumper(list, ArrayDumper)
