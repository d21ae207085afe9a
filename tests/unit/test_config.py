from __future__ import annotations

import dataclasses

import pytest

from shepherd.config import Settings
from shepherd.errors import ConfigError


def test_defaults() -> None:
    settings = Settings.from_env({})
    assert settings == Settings()
    assert settings.store == "sqlite:///shepherd.db"
    assert settings.sqlite_synchronous == "FULL"
    assert settings.max_payload_bytes == 1024 * 1024
    assert settings.lease_ttl == 1.5


def test_env_overrides_defaults_and_kwargs_override_env() -> None:
    env = {
        "SHEPHERD_CLAIM_BATCH": "32",
        "SHEPHERD_POLL_INTERVAL": "0.5",
        "SHEPHERD_STORE": "postgresql://db.example/shepherd",
        "SHEPHERD_SQLITE_SYNCHRONOUS": "normal",
    }
    settings = Settings.from_env(env, claim_batch=8)
    assert settings.claim_batch == 8  # kwargs win
    assert settings.poll_interval == 0.5  # env wins over the default
    assert settings.store == "postgresql://db.example/shepherd"
    assert settings.sqlite_synchronous == "NORMAL"
    assert settings.supervisor_interval == 1.0  # default


def test_reads_os_environ_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHEPHERD_MAX_IN_FLIGHT", "7")
    assert Settings.from_env().max_in_flight == 7


def test_every_field_has_an_env_variable() -> None:
    values = {
        "store": ("postgres://h/db", "postgres://h/db"),
        "supervisor_interval": ("2", 2.0),
        "claim_batch": ("3", 3),
        "max_in_flight": ("4", 4),
        "agent_concurrency": ("5", 5),
        "agent_threads": ("6", 6),
        "block_warning": ("0.25", 0.25),
        "poll_interval": ("0.25", 0.25),
        "idle_poll_max": ("1.5", 1.5),
        "lease_ttl": ("7.5", 7.5),
        "default_complete_within": ("60", 60.0),
        "default_step_within": ("9", 9.0),
        "max_payload_bytes": ("1024", 1024),
        "sqlite_synchronous": ("NORMAL", "NORMAL"),
        "read_pool_min": ("3", 3),
        "read_pool_max": ("9", 9),
        "store_timeout": ("2.5", 2.5),
        "breaker_refresh": ("0.5", 0.5),
        "worker_beat": ("0.5", 0.5),
        "worker_ttl": ("3", 3.0),
        "poison_crashes": ("4", 4),
        "max_owner_deaths": ("12", 12),
        "retention": ("86400", 86400.0),
        "key_retention": ("172800.5", 172800.5),
        "purge_batch": ("100", 100),
        "purge_interval": ("30", 30.0),
        "resolver_refresh": ("5", 5.0),
        "resolver_refresh_ahead": ("2", 2.0),
        "slot_lease": ("6", 6.0),
        "default_partition": (" shared ", "shared"),
        "owner_lease": ("4", 4.0),
        "gc_threshold": ("50000", 50000),
    }
    assert set(values) == {f.name for f in dataclasses.fields(Settings)}
    settings = Settings.from_env({f"SHEPHERD_{k.upper()}": raw for k, (raw, _) in values.items()})
    assert {k: getattr(settings, k) for k in values} == {k: v for k, (_, v) in values.items()}


def test_settings_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        Settings().claim_batch = 1  # type: ignore[misc]


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("supervisor_interval", 0, "positive number of seconds"),
        ("poll_interval", -0.1, "positive number of seconds"),
        ("idle_poll_max", 0, "positive number of seconds"),
        ("lease_ttl", float("inf"), "positive number of seconds"),
        ("default_complete_within", float("nan"), "positive number of seconds"),
        ("default_step_within", "30", "must be a number, not str"),
        ("claim_batch", 0, "positive integer"),
        ("max_in_flight", 1.5, "must be an integer"),
        ("agent_concurrency", True, "must be a number, not bool"),
        ("agent_threads", 0, "positive integer"),
        ("block_warning", 0, "positive number of seconds"),
        ("max_payload_bytes", -1, "positive integer"),
        ("sqlite_synchronous", "OFF", "must be one of FULL, NORMAL"),
        ("read_pool_min", 0, "positive integer"),
        ("read_pool_max", 2.5, "must be an integer"),
        ("breaker_refresh", 0, "positive number of seconds"),
        ("store_timeout", 0, "positive number of seconds"),
        ("store_timeout", float("nan"), "positive number of seconds"),
        ("worker_beat", 0, "positive number of seconds"),
        ("worker_ttl", float("inf"), "positive number of seconds"),
        ("poison_crashes", 0, "positive integer"),
        ("max_owner_deaths", 1.5, "must be an integer"),
        ("retention", 0, "positive number of seconds"),
        ("key_retention", -1.0, "positive number of seconds"),
        ("purge_batch", 0, "positive integer"),
        ("gc_threshold", 0, "positive integer"),
        ("owner_lease", 0, "positive number of seconds"),
        ("purge_interval", "60", "must be a number, not str"),
        ("sqlite_synchronous", 1, "must be a string"),
        ("store", "mysql://localhost/db", "unsupported scheme 'mysql'"),
        ("store", "shepherd.db", "must be a URL"),
        ("store", "sqlite://", "names no database"),
    ],
)
def test_each_validation_names_the_field(field: str, value: object, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem) as caught:
        Settings.from_env({}, **{field: value})
    assert caught.value.field == field
    assert f"'{field}'" in str(caught.value)
    with pytest.raises(ConfigError, match=problem):
        Settings(**{field: value})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("field", "raw", "problem"),
    [
        ("claim_batch", "many", "must be an integer"),
        ("claim_batch", "-3", "positive integer"),
        ("lease_ttl", "soon", "must be a number of seconds"),
        ("poll_interval", "0", "positive number of seconds"),
        ("sqlite_synchronous", "EXTRA", "must be one of"),
    ],
)
def test_env_errors_name_the_variable(field: str, raw: str, problem: str) -> None:
    var = f"SHEPHERD_{field.upper()}"
    with pytest.raises(ConfigError, match=problem) as caught:
        Settings.from_env({var: raw})
    assert caught.value.field == field
    assert f"from {var}={raw!r}" in str(caught.value)


def test_retention_defaults_keep_ended_tasks_a_week_and_keys_a_month() -> None:
    settings = Settings()
    assert (settings.retention, settings.key_retention) == (7 * 86400.0, 30 * 86400.0)
    assert (settings.purge_batch, settings.purge_interval) == (500, 60.0)
    assert Settings.from_env({"SHEPHERD_RETENTION": "3600.5"}).retention == 3600.5


def test_worker_ttl_must_outlast_a_beat() -> None:
    assert (Settings().worker_beat, Settings().worker_ttl) == (1.0, 10.0)
    with pytest.raises(ConfigError, match=r"longer than worker_beat \(1 s\), not 1 s") as caught:
        Settings(worker_ttl=1.0)
    assert caught.value.field == "worker_ttl"
    with pytest.raises(ConfigError, match="longer than worker_beat") as caught:
        Settings.from_env({"SHEPHERD_WORKER_BEAT": "30"})
    assert caught.value.field == "worker_ttl"
    env = {"SHEPHERD_WORKER_BEAT": "30", "SHEPHERD_WORKER_TTL": "90"}
    assert Settings.from_env(env).worker_ttl == 90


def test_an_idle_polls_longest_wait_is_never_below_the_poll_interval() -> None:
    assert (Settings().poll_interval, Settings().idle_poll_cap) == (0.2, 2.0)
    # A poll interval raised alone is not an error: no backoff above it.
    assert Settings.from_env({"SHEPHERD_POLL_INTERVAL": "5"}).idle_poll_cap == 5.0
    assert Settings(poll_interval=0.5, idle_poll_max=0.25).idle_poll_cap == 0.5


def test_store_errors_never_show_the_password() -> None:
    with pytest.raises(ConfigError) as caught:
        Settings.from_env({"SHEPHERD_STORE": "mysql://admin:hunter2@db/x"})
    assert "SHEPHERD_STORE" in str(caught.value)
    assert "hunter2" not in str(caught.value)
    assert "hunter2" not in repr(Settings(store="postgresql://admin:hunter2@db/x"))


def test_unknown_keyword_is_refused() -> None:
    with pytest.raises(ConfigError, match="unknown setting") as caught:
        Settings.from_env({}, claim_size=3)
    assert caught.value.field == "claim_size"


def test_unknown_env_variables_are_ignored() -> None:
    assert Settings.from_env({"SHEPHERD_SOMETHING_ELSE": "x", "PATH": "/bin"}) == Settings()


def test_read_pool_defaults_and_bounds() -> None:
    assert (Settings().read_pool_min, Settings().read_pool_max) == (2, 8)
    assert Settings(read_pool_min=4, read_pool_max=4).read_pool_max == 4
    with pytest.raises(ConfigError, match=r"at least read_pool_min \(3\), not 2") as caught:
        Settings(read_pool_min=3, read_pool_max=2)
    assert caught.value.field == "read_pool_max"
    # A minimum above the default maximum is refused too, and the message says what to do.
    with pytest.raises(ConfigError, match="raise read_pool_max or lower read_pool_min"):
        Settings.from_env({"SHEPHERD_READ_POOL_MIN": "10"})
