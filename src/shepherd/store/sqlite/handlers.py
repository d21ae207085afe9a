"""The SQLite store's handler tables, complete: every handler module imported (`store.dispatch`)."""

from __future__ import annotations

from shepherd.store.dispatch import import_handlers
from shepherd.store.sqlite.batch import READS, WRITES

__all__ = ["READS", "WRITES"]

import_handlers("shepherd.store.sqlite")
