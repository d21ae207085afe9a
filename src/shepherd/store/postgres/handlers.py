"""The PostgreSQL store's handler tables, complete: every handler module imported (`store.dispatch`)."""

from __future__ import annotations

from shepherd.store.dispatch import import_handlers
from shepherd.store.postgres.batch import WRITES
from shepherd.store.postgres.reader import READS

__all__ = ["READS", "WRITES"]

import_handlers("shepherd.store.postgres")
