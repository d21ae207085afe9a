"""Resource governance: where an entity lives (`Resolver`), by the store's mapping or a function."""

from __future__ import annotations

from shepherd.governance.resolver import Resolver, StaticResolver, StoreResolver

__all__ = ["Resolver", "StaticResolver", "StoreResolver"]
