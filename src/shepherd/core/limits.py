"""The longest value of every caller-given text the store indexes, in bytes of UTF-8.

A store keeps these texts in indexes (`tasks (workflow, key)`, `owner_keys
(agent, key)`, `events (reply_to, ...)`, `done_keys (key)`...). PostgreSQL
refuses an index row over 2,704 bytes (a B-tree's third of a page), SQLite
none: without one limit checked before the store, a key accepted on SQLite
fails on PostgreSQL, and only once it is long enough and random enough not
to compress. Each limit here is counted in bytes of UTF-8, which is what an
index holds; the widest index row they allow (a name and a key, 800 + 1,024
bytes, plus the row's overhead) leaves PostgreSQL's limit about 800 bytes of
room. They are checked before anything is written (keys and `reply_to` by
`App.submit`, owner keys by `App.call`, workflow and agent names when they are
registered, resource names and `by` by the store's operations before their
SQL), so the same value is refused alike on both backends
(docs/reference/limits.md).

    what                                    limit (bytes)
    task key, reply_to, owner key,          KEY_BYTES      1024
      once() name
    workflow, agent and service names;      NAME_BYTES     800
      resource, partition and entity
      names; `by` (who acts)
    operator name (ASCII)                   OPERATOR_NAME_BYTES  64

800 bytes of names is the former 200 characters at their widest (4 bytes
each): every name accepted before still is.
"""

from __future__ import annotations

__all__ = [
    "KEY_BYTES",
    "NAME_BYTES",
    "OPERATOR_NAME_BYTES",
    "POSTGRES_INDEX_ROW_BYTES",
    "too_long",
    "utf8_bytes",
]

#: Task keys, `reply_to` tags, exclusive agents' owner keys, `request.once(name=...)` names.
KEY_BYTES = 1024
#: Names of workflows, agents, services, resources, partitions and entities, and `by`.
NAME_BYTES = 800
#: Operator (named token) names: ASCII, so as many characters as bytes.
OPERATOR_NAME_BYTES = 64
#: PostgreSQL's largest B-tree index row (version 4, 8 KB pages): what the limits keep under.
POSTGRES_INDEX_ROW_BYTES = 2704


def utf8_bytes(value: str) -> int:
    """How many bytes `value` takes in UTF-8 (a lone surrogate counts as 3, as when escaped)."""
    if value.isascii():
        return len(value)
    return len(value.encode("utf-8", "surrogatepass"))


def too_long(field: str, value: str, limit: int) -> str | None:
    """Why `value` is too long for `field`, naming the field and the limit; None if it is not.

    Args:
        field: The argument as the message names it (`key`, `reply_to`...).
        value: Its text.
        limit: Its limit in bytes of UTF-8 (KEY_BYTES, NAME_BYTES...).
    """
    if len(value) <= limit // 4:  # no character takes more than 4 bytes
        return None
    size = utf8_bytes(value)
    if size <= limit:
        return None
    return (
        f"{field} is {size} bytes of UTF-8, over its limit of {limit} bytes "
        f"(it starts {value[:40]!r})"
    )
