"""How a batch encodes what it stores, for both backends: JSON text within the payload limit."""

from __future__ import annotations

from typing import TYPE_CHECKING

from shepherd.payloads import MAX_PAYLOAD_BYTES, dumps, dumps_error

if TYPE_CHECKING:
    from shepherd.core.records import JsonValue

__all__ = ["Encoding"]


class Encoding:
    """The payload encoding of a backend's `Batch` (its base class).

    Args:
        payload_limit: The most bytes a payload may take as JSON text.
    """

    __slots__ = ("payload_limit",)

    def __init__(self, *, payload_limit: int = MAX_PAYLOAD_BYTES) -> None:
        self.payload_limit = payload_limit

    def dumps(self, value: JsonValue) -> str:
        """Encode a payload as JSON text, within the store's payload limit."""
        return dumps(value, limit=self.payload_limit)

    def dumps_error(self, value: JsonValue) -> str:
        """Encode an error as JSON text, cut (never refused) to the store's payload limit."""
        return dumps_error(value, limit=self.payload_limit)

    def encode(self, value: JsonValue) -> str | Exception:
        """`dumps(value)`, or the error refusing it: that operation's outcome, the batch goes on."""
        try:
            return self.dumps(value)
        except Exception as exc:
            return exc
