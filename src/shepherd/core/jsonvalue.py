"""`JsonValue`: the type of what JSON can carry, for every record and payload.

A leaf of its own, so that the records and the resource records can both use it
without importing each other. `shepherd.core.records` re-exports it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["JsonValue"]

#: A value that JSON can carry. `Any` appears in shepherd only under this name.
JsonValue = Any
