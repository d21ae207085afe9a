"""`http_agent` options: the breaker's service name defaults to the URL's host."""

from __future__ import annotations

from pathlib import Path

from shepherd import App, BreakerPolicy, RetryPolicy
from shepherd.agents.http import http_agent


def test_agents_calling_one_host_share_its_breaker(tmp_path: Path) -> None:
    app = App(store=f"sqlite:///{tmp_path / 'x.db'}", alerts=())
    policy = BreakerPolicy(failure_threshold=3)
    http_agent(app, "charge", "POST", "http://127.0.0.1:8123/charges", breaker=policy)
    http_agent(app, "refund", "POST", "http://127.0.0.1:8123/refunds", breaker=policy)
    http_agent(app, "ship", "POST", "https://carrier.example/parcels", breaker=policy)
    http_agent(app, "notify", "POST", "https://mail.example/send", breaker=policy, service="mail")
    http_agent(app, "plain", "GET", "https://carrier.example/track", retry=RetryPolicy())

    services = {name: agent.service_name for name, agent in app.agents.items()}

    assert services == {
        "charge": "127.0.0.1:8123",
        "refund": "127.0.0.1:8123",
        "ship": "carrier.example",
        "notify": "mail",
        "plain": "plain",
    }
    assert app.agents["charge"].breaker == policy
    assert app.agents["plain"].breaker is None
