"""`OwnerServer`, at its former path: it lives in `shepherd.governance.owners`."""

from __future__ import annotations

from shepherd.governance.owners import OwnerServer, owner_of

__all__ = ["OwnerServer", "owner_of"]
