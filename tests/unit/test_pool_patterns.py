"""The rules of pools per service: which registered agents a list of glob patterns picks."""

from __future__ import annotations

import pytest

from shepherd.agents.pools import check_pool, parse_patterns, pool_agents
from shepherd.errors import ConfigError

AGENTS = ("mail.send", "pay.charge", "pay.refund")


def test_patterns_are_globs_and_any_of_them_may_match() -> None:
    names = ["pay.charge", "pay.refund", "mail.send", "payroll"]
    assert pool_agents(names, ["pay.*"]) == ("pay.charge", "pay.refund")
    assert pool_agents(names, ["pay*"]) == ("pay.charge", "pay.refund", "payroll")
    assert pool_agents(names, ["mail.send", "pay.re*"]) == ("mail.send", "pay.refund")
    assert pool_agents(names, ["pay.[cr]*", "pay.charge"]) == ("pay.charge", "pay.refund")
    assert pool_agents(names, "mail.*") == ("mail.send",)  # one pattern, not its letters
    with pytest.raises(ConfigError, match=r"'PAY\.\*' matches no registered agent"):
        pool_agents(names, ["PAY.*"])  # case sensitive, as agent names are


def test_the_command_line_form_is_split_on_commas() -> None:
    assert parse_patterns("pay.*, mail.send,pay.*") == ("pay.*", "mail.send")
    for empty in ("", " , ,"):
        with pytest.raises(ConfigError, match="name at least one agent or glob pattern"):
            parse_patterns(empty)


def test_no_patterns_means_every_agent_whatever_the_roles() -> None:
    assert check_pool(["scheduler"], None, AGENTS) is None
    assert check_pool(["agent"], ["mail.*"], AGENTS) == ("mail.send",)
    with pytest.raises(ConfigError, match="the roles are scheduler, supervisor"):
        check_pool(["scheduler", "supervisor"], ["mail.*"], AGENTS)
