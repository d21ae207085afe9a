"""Resource governance's pure rules: names and limits, changes, the versioned cache, the errors."""

from __future__ import annotations

import pytest

from shepherd.config import Settings
from shepherd.core.resolution import VersionedCache
from shepherd.core.resources import (
    KEEP,
    Resolution,
    Resource,
    ResourceChange,
    check_capacity,
    check_info,
    check_kind,
    check_name,
    check_rate,
    check_resource,
)
from shepherd.errors import (
    ConfigError,
    InvalidResourceError,
    ResourceError,
    ResourceInUseError,
    ShepherdError,
    UnknownPartitionError,
    UnknownResourceError,
    UnresolvedEntityError,
)

DB = Resource(name="db", kind="sqlite", info={"path": "a.db"}, capacity=2, rate=5.0)


@pytest.mark.parametrize("name", ["db", "user-42", "x" * 200, "é"])
def test_good_names(name: str) -> None:
    assert check_name("entity", name) is None


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("", "must be non-empty"),
        (" a", "without leading or trailing spaces"),
        ("x" * 801, "801 bytes of UTF-8, over its limit of 800 bytes"),
        ("a\nb", "control character"),
        (42, "must be a str, not int"),
    ],
)
def test_bad_names_say_why(name: object, problem: str) -> None:
    found = check_name("partition", name)
    assert found is not None
    assert problem in found
    assert found.startswith("partition name")


@pytest.mark.parametrize(
    ("capacity", "ok"),
    [(None, True), (1, True), (0, False), (-3, False), (True, False), (2.0, False)],
)
def test_capacity_is_a_whole_number_of_at_least_one(capacity: object, ok: bool) -> None:
    assert (check_capacity(capacity) is None) is ok


@pytest.mark.parametrize(
    ("rate", "ok"),
    [
        (None, True),
        (0.5, True),
        (3, True),
        (0, False),
        (-1.0, False),
        (float("inf"), False),
        (float("nan"), False),
        (False, False),
        ("2", False),
    ],
)
def test_rate_is_positive_and_finite(rate: object, ok: bool) -> None:
    assert (check_rate(rate) is None) is ok


def test_info_is_an_object_with_string_keys() -> None:
    assert check_info({"a": [1]}) is None
    assert check_info([1]) == "info must be a JSON object, not list"
    assert check_info({1: "a"}) == "info's keys must be strings"


def test_kind_is_a_name() -> None:
    assert check_kind("postgres") is None
    assert check_kind("") == "kind '' must be non-empty, without leading or trailing spaces"
    assert check_kind(None) == "kind must be a str, not NoneType"


def test_check_resource_names_the_first_bad_field() -> None:
    assert check_resource(DB) is None
    assert check_resource(Resource(name="db", kind="k", info={}, capacity=0)) == (
        "capacity",
        "capacity must be at least 1, not 0",
    )
    assert check_resource(Resource(name="", kind="", info={}))[0] == "name"  # type: ignore[index]


def test_a_change_keeps_what_it_does_not_name_and_clears_with_none() -> None:
    assert ResourceChange().is_empty()
    assert ResourceChange().applied_to(DB) == DB
    cleared = ResourceChange(capacity=None, rate=KEEP, kind="postgres").applied_to(DB)
    assert cleared == Resource(name="db", kind="postgres", info={"path": "a.db"}, rate=5.0)
    assert not ResourceChange(rate=None).is_empty()


def test_records_survive_json() -> None:
    resolution = Resolution(entity="u1", partition="p1", resource=DB)
    assert Resolution.from_json(resolution.to_json()) == resolution
    assert resolution.to_json()["resource"] == {
        "name": "db",
        "kind": "sqlite",
        "info": {"path": "a.db"},
        "capacity": 2,
        "rate": 5.0,
    }


# -- the versioned cache ----------------------------------------------------------
def test_the_cache_keeps_answers_of_the_newest_version() -> None:
    cache: VersionedCache[str, int] = VersionedCache()
    assert cache.put("a", 1, version=3)
    assert (cache.get("a"), cache.version, len(cache)) == (1, 3, 1)

    assert not cache.observe(3)
    assert not cache.observe(2)
    assert cache.get("a") == 1


def test_a_newer_version_drops_every_answer() -> None:
    cache: VersionedCache[str, int] = VersionedCache()
    cache.put("a", 1, version=1)
    cache.put("b", 2, version=1)

    assert cache.observe(2)

    assert (cache.get("a"), cache.get("b"), cache.version) == (None, None, 2)


def test_an_answer_read_before_a_move_is_not_cached_after_it() -> None:
    cache: VersionedCache[str, int] = VersionedCache()
    cache.observe(5)

    assert not cache.put("a", 1, version=4)

    assert cache.get("a") is None
    assert cache.put("a", 2, version=6)
    assert (cache.get("a"), cache.version) == (2, 6)


def test_the_cache_drops_its_oldest_answer_when_full() -> None:
    cache: VersionedCache[str, int] = VersionedCache(limit=2)
    cache.put("a", 1, version=0)
    cache.put("b", 2, version=0)
    cache.put("a", 3, version=0)  # refreshed: now the newest
    cache.put("c", 4, version=0)

    assert cache.keys() == ["a", "c"]
    cache.clear()
    assert (len(cache), cache.version) == (0, 0)
    with pytest.raises(ValueError, match="at least 1"):
        VersionedCache(limit=0)


# -- settings and errors ------------------------------------------------------------
def test_resolver_settings() -> None:
    assert (Settings().resolver_refresh, Settings().default_partition) == (30.0, None)
    assert Settings.from_env({"SHEPHERD_DEFAULT_PARTITION": ""}).default_partition is None
    assert Settings(default_partition="shared").default_partition == "shared"
    with pytest.raises(ConfigError, match=r"'default_partition'.*partition name ' x' must be"):
        Settings(default_partition=" x")
    with pytest.raises(ConfigError, match="resolver_refresh"):
        Settings(resolver_refresh=0)


def test_the_errors_name_what_was_wrong() -> None:
    assert issubclass(InvalidResourceError, ConfigError)
    for error in (UnknownResourceError, ResourceInUseError, UnresolvedEntityError):
        assert issubclass(error, ResourceError)
    assert issubclass(ResourceError, ShepherdError)
    assert str(InvalidResourceError("resource 'db'", "rate", "rate must be above 0")) == (
        "resource 'db': rate must be above 0"
    )
    assert "unknown partition 'p9' (for entity 'u1')" in str(
        UnknownPartitionError("p9", entity="u1")
    )
    in_use = ResourceInUseError("db", [f"p{i}" for i in range(12)])
    assert "'p0', 'p1'" in str(in_use)
    assert "and 2 more" in str(in_use)
    assert in_use.partitions[-1] == "p11"
    unresolved = UnresolvedEntityError("u1")
    assert unresolved.entity == "u1"
    assert "entity 'u1' cannot be resolved" in str(unresolved)
    assert "no default_partition is configured" in str(unresolved)
