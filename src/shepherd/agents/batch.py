"""`Batch`, at its former path: it lives in `shepherd.governance.batch`."""

from __future__ import annotations

from shepherd.governance.batch import Batch

__all__ = ["Batch"]
