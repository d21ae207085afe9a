"""State stores: `open_store(url)` picks the backend by the URL's scheme."""

from __future__ import annotations

from typing import TYPE_CHECKING

from shepherd.errors import StoreUnavailableError

if TYPE_CHECKING:
    from shepherd.clock import Clock
    from shepherd.store.contract import Store


def open_store(
    url: str,
    *,
    clock: Clock | None = None,
    sqlite_synchronous: str = "FULL",
    max_payload_bytes: int = 1024 * 1024,
    read_pool_min: int = 2,
    read_pool_max: int = 8,
    store_timeout: float = 5.0,
    migrate: bool = True,
) -> Store:
    """A store for `url` (not yet opened): `sqlite:///file.db` or `postgresql://...`.

    `sqlite_synchronous` applies to SQLite only; `read_pool_min` and
    `read_pool_max` (the read connections' pool) to PostgreSQL only;
    `store_timeout` (how long one round trip may take) to both. With
    `migrate` False, opening the store creates nothing and migrates nothing: a
    missing store, one that is not shepherd's, or one of another schema version
    is refused with an UnusableStoreError, the file or database left as it was.
    """
    if url.startswith("sqlite://"):
        from shepherd.store.sqlite import SQLiteStore

        return SQLiteStore(
            url,
            clock=clock,
            synchronous=sqlite_synchronous,
            max_payload_bytes=max_payload_bytes,
            store_timeout=store_timeout,
            migrate=migrate,
        )
    if url.startswith(("postgresql://", "postgres://")):
        try:
            from shepherd.store.postgres import PostgresStore
        except ImportError as exc:
            missing = exc.name or "psycopg"
            raise StoreUnavailableError(
                f"a PostgreSQL store needs the 'postgres' extra ({missing} is missing): "
                "pip install 'shepherd[postgres]'"
            ) from exc
        return PostgresStore(
            url,
            clock=clock,
            max_payload_bytes=max_payload_bytes,
            min_connections=read_pool_min,
            max_connections=read_pool_max,
            store_timeout=store_timeout,
            migrate=migrate,
        )
    scheme = url.split(":", 1)[0] if ":" in url else url
    raise StoreUnavailableError(
        f"unsupported store URL {url!r}: scheme {scheme!r} is not sqlite:// or postgresql://"
    )
