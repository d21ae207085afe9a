"""The dashboard's door: the Host allowlist, a public URL behind a proxy, the proxy's headers,
the token's length and failed logins slowed; and the inputs that once made it answer 500.

Requests go through the ASGI application in process (httpx's ASGITransport,
whose `client` is the peer's address). What the door decides touches no
store: those tests run on SQLite only; the task list's bounds at the ends of
time are read by the store, on both backends.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from shepherd.dashboard import Reach, check_exposure, create_dashboard
from shepherd.dashboard.auth import COOKIE
from shepherd.dashboard.reach import host_of, origin_of
from shepherd.dashboard.throttle import LIMIT, WINDOW, LoginThrottle
from shepherd.errors import ConfigError
from support.backends import sqlite_only

if TYPE_CHECKING:
    from starlette.types import ASGIApp

    from shepherd import AgentRequest, App, WorkflowContext
    from shepherd.core.records import JsonValue

TOKEN = "the-shared-dashboard-token"
PUBLIC = "https://ops.example.com"

Client = Callable[..., httpx.AsyncClient]


@pytest.fixture
async def client(app: App) -> AsyncIterator[Client]:
    """Makes clients of a dashboard over `app` (`client(site, peer=..., host=...)`)."""
    await app.open()
    made: list[httpx.AsyncClient] = []

    def make(
        site: ASGIApp, *, peer: str = "127.0.0.1", host: str = "127.0.0.1:8080"
    ) -> httpx.AsyncClient:
        transport = httpx.ASGITransport(app=site, client=(peer, 40_000))
        http = httpx.AsyncClient(transport=transport, base_url=f"http://{host}")
        made.append(http)
        return http

    yield make
    for http in made:
        await http.aclose()


def _csrf(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found is not None, "the page has no form with a CSRF token"
    return found[1]


# -- the Host allowlist: DNS rebinding -------------------------------------------------
@sqlite_only()
async def test_a_foreign_host_on_an_open_loopback_dashboard_gets_nothing(
    app: App, client: Client
) -> None:
    site = create_dashboard(app, token=None)
    evil = client(site, host="evil.example:8080")
    for method, path in (("GET", "/"), ("GET", "/tasks"), ("POST", "/logout")):
        headers = {"Origin": "http://evil.example:8080"}
        refused = await evil.request(method, path, headers=headers)
        assert refused.status_code == 400, (method, path)
        assert "does not answer to the host 'evil.example:8080'" in refused.text
        assert "--allowed-host" in refused.text
        assert "set-cookie" not in refused.headers
        assert "csrf" not in refused.text
    assert COOKIE not in evil.cookies
    for host in ("localhost:8080", "127.0.0.1:1", "[::1]:8080", "LOCALHOST", "127.0.0.2"):
        page = await client(site, host=host).get("/")
        assert page.status_code == 200, host
        assert COOKIE in page.cookies


@sqlite_only()
async def test_the_listening_address_the_public_url_and_allowed_hosts_are_answered(
    app: App, client: Client
) -> None:
    reach = Reach.of(
        host="10.1.2.3", public_url=PUBLIC, allowed_hosts=["Dash.Internal", "[fd00::1]"]
    )
    http = client(create_dashboard(app, token=TOKEN, reach=reach))
    for host in ("10.1.2.3:8080", "ops.example.com", "dash.internal:9", "[fd00::1]:80"):
        assert (await http.get("/tasks", headers={"Host": host})).status_code == 303, host
    for host in ("10.1.2.4", "example.com", "ops.example.com.evil", "", "a:b:c", "[::1", "x:"):
        assert (await http.get("/tasks", headers={"Host": host})).status_code == 400, host
    wildcard = create_dashboard(app, token=TOKEN, reach=Reach.of(host="0.0.0.0"))
    assert (await client(wildcard, host="0.0.0.0:8080").get("/tasks")).status_code == 400
    anything = create_dashboard(app, token=TOKEN, reach=Reach.of(allowed_hosts=["*"]))
    assert (await client(anything, host="evil.example").get("/tasks")).status_code == 303


@pytest.mark.parametrize(
    ("given", "field"),
    [
        ({"public_url": "ops.example.com"}, "public_url"),
        ({"public_url": "ftp://ops.example.com"}, "public_url"),
        ({"public_url": "https://ops.example.com/dashboard/"}, "public_url"),
        ({"public_url": "https://anna:pw@ops.example.com"}, "public_url"),
        ({"public_url": "https://ops.example.com:99999"}, "public_url"),
        ({"allowed_hosts": ["evil.example/x"]}, "allowed_host"),
        ({"allowed_hosts": ["a b"]}, "allowed_host"),
        ({"forwarded_allow_ips": ["proxy.internal"]}, "forwarded_allow_ips"),
    ],
)
def test_a_malformed_reach_is_refused_naming_it(given: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Reach.of(**given)  # type: ignore[arg-type]
    assert caught.value.field == field


# -- behind a proxy ---------------------------------------------------------------------
@sqlite_only()
async def test_behind_a_public_url_the_origin_is_the_public_one_and_the_cookie_secure(
    app: App, client: Client
) -> None:
    reach = Reach.of(public_url=PUBLIC, allowed_hosts=["dashboard-upstream"])
    site = create_dashboard(app, token=TOKEN, reach=reach)
    # nginx's default `proxy_set_header Host $proxy_host`: the upstream's name and port.
    upstream = client(site, host="dashboard-upstream:8080")
    assert (
        await upstream.post("/login", data={"token": TOKEN}, headers={"Origin": PUBLIC})
    ).status_code == 303
    assert (
        await upstream.post(
            "/login", data={"token": TOKEN}, headers={"Origin": "https://dashboard-upstream:8080"}
        )
    ).status_code == 403  # not the scheme the request came in with
    http = client(site, host="127.0.0.1:8080")
    foreign = await http.post(
        "/login", data={"token": TOKEN}, headers={"Origin": "https://evil.example"}
    )
    assert foreign.status_code == 403
    assert COOKIE not in http.cookies
    logged = await http.post("/login", data={"token": TOKEN}, headers={"Origin": PUBLIC})
    assert logged.status_code == 303
    cookie = logged.headers["set-cookie"]
    assert "; secure" in cookie.lower()
    assert "httponly" in cookie.lower()
    # Same origin, written as a browser may write it (the default port).
    assert (
        await http.post("/login", data={"token": TOKEN}, headers={"Origin": PUBLIC + ":443"})
    ).status_code == 303
    assert (
        await http.post("/login", data={"token": TOKEN}, headers={"Origin": "null"})
    ).status_code == 403


@sqlite_only()
async def test_the_forwarded_scheme_is_believed_from_a_trusted_proxy_only(
    app: App, client: Client
) -> None:
    reach = Reach.of(forwarded_allow_ips=["10.0.0.0/8"])
    site = create_dashboard(app, token=TOKEN, reach=reach)
    forwarded = {"X-Forwarded-Proto": "https", "Origin": "https://127.0.0.1:8080"}
    trusted = await client(site, peer="10.0.0.5").post(
        "/login", data={"token": TOKEN}, headers=forwarded
    )
    assert trusted.status_code == 303
    assert "; secure" in trusted.headers["set-cookie"].lower()
    untrusted = client(site, peer="192.168.1.9")
    # Not believed: the scheme stays http, so an https Origin is another site's.
    assert (
        await untrusted.post("/login", data={"token": TOKEN}, headers=forwarded)
    ).status_code == 403
    plain = await untrusted.post(
        "/login", data={"token": TOKEN}, headers={"X-Forwarded-Proto": "https"}
    )
    assert plain.status_code == 303
    assert "secure" not in plain.headers["set-cookie"].lower()


# -- the token ------------------------------------------------------------------------------
@sqlite_only()
async def test_a_short_token_is_refused(app: App) -> None:
    for token in ("x", "fifteen-chars-x", " " * 20):
        with pytest.raises(ConfigError) as caught:
            create_dashboard(app, token=token)
        assert caught.value.field == "token"
        assert token.strip() == "" or "at least 16" in caught.value.message
        assert token.strip() == "" or token not in caught.value.message
        with pytest.raises(ConfigError):
            check_exposure("0.0.0.0", token)
    check_exposure("0.0.0.0", "sixteen-chars-ok")
    with pytest.raises(ConfigError, match=r"reachable by others at https://ops\.example\.com"):
        check_exposure("127.0.0.1", None, public_url=PUBLIC)
    assert len(await app.operations.add_operator("anna")) >= 16


# -- failed logins, slowed ----------------------------------------------------------------
@sqlite_only()
async def test_failed_logins_are_slowed_per_client_address(app: App, client: Client) -> None:
    now = [1000.0]
    throttle = LoginThrottle(now=lambda: now[0])
    reach = Reach.of(forwarded_allow_ips=["10.0.0.1"])
    site = create_dashboard(app, token=TOKEN, reach=reach, throttle=throttle)
    guesser = client(site, peer="192.0.2.1")
    for _ in range(LIMIT):
        assert (await guesser.post("/login", data={"token": "wrong"})).status_code == 401
    slowed = await guesser.post("/login", data={"token": TOKEN})  # even the right one waits
    assert slowed.status_code == 429
    assert slowed.headers["retry-after"] == str(int(WINDOW))
    assert "try again in 60 s" in slowed.text
    bearer = await guesser.get("/tasks", headers={"Authorization": f"Bearer {TOKEN}"})
    assert bearer.status_code == 429
    # Another address is not slowed; nor one a trusted proxy forwards.
    assert (
        await client(site, peer="192.0.2.2").post("/login", data={"token": TOKEN})
    ).status_code == 303
    proxy = client(site, peer="10.0.0.1")
    via = {"X-Forwarded-For": "198.51.100.7"}
    assert (await proxy.post("/login", data={"token": TOKEN}, headers=via)).status_code == 303
    # Through the trusted proxy, the forwarded client is slowed, not the proxy's other clients.
    guessing = {"X-Forwarded-For": "198.51.100.9"}
    for _ in range(LIMIT):
        wrong = await proxy.post("/login", data={"token": "wrong"}, headers=guessing)
        assert wrong.status_code == 401
    right = await proxy.post("/login", data={"token": TOKEN}, headers=guessing)
    assert right.status_code == 429
    assert (await proxy.post("/login", data={"token": TOKEN}, headers=via)).status_code == 303
    # An untrusted peer's X-Forwarded-For is not believed: it is slowed as itself.
    spoof = {"X-Forwarded-For": "198.51.100.8"}
    assert (await guesser.post("/login", data={"token": TOKEN}, headers=spoof)).status_code == 429
    now[0] += WINDOW - 1
    assert (await guesser.post("/login", data={"token": TOKEN})).headers["retry-after"] == "1"
    now[0] += 1
    assert (await guesser.post("/login", data={"token": TOKEN})).status_code == 303


@sqlite_only()
async def test_wrong_bearer_tokens_are_slowed_too(app: App, client: Client) -> None:
    now = [0.0]
    site = create_dashboard(app, token=TOKEN, throttle=LoginThrottle(now=lambda: now[0]))
    script = client(site, peer="192.0.2.3")
    for _ in range(LIMIT):
        wrong = await script.get(
            "/metrics", headers={"Authorization": "Bearer nope-nope-nope-nope"}
        )
        assert wrong.status_code == 401
    assert (
        await script.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    ).status_code == 429
    now[0] += WINDOW
    assert (
        await script.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    ).status_code == 200


def test_the_throttle_remembers_a_bounded_number_of_addresses() -> None:
    throttle = LoginThrottle(now=lambda: 0.0, limit=1, clients=3)
    for n in range(10):
        throttle.failed(f"192.0.2.{n}")
    assert [throttle.wait(f"192.0.2.{n}") for n in range(10)] == [0] * 7 + [60] * 3


# -- the inputs that once answered 500 ----------------------------------------------------------
def _register(app: App) -> None:
    """Workflow `orders.check` (its tasks stay pending here: no role runs)."""

    @app.agent("check")
    async def check(request: AgentRequest) -> JsonValue:
        return request.payload

    @app.workflow("orders.check")
    async def flow(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.call("check", data)


@sqlite_only()
async def test_a_step_number_not_in_ascii_digits_or_past_any_store_is_a_400(
    app: App, client: Client
) -> None:
    _register(app)
    task_id = await app.submit("orders.check", {"n": 1})
    http = client(create_dashboard(app, token=None))
    csrf = _csrf((await http.get(f"/tasks/{task_id}")).text)
    for seq, says in (
        ("²", "a whole number is needed, not &#39;²&#39;"),
        ("1" + "0" * 30, "a number of 31 digits is not between 1 and 2147483647"),
        ("0", "0 is not between 1 and 2147483647"),
        ("10^30", "a whole number is needed, not &#39;10^30&#39;"),
    ):
        refused = await http.post(
            f"/tasks/{task_id}/retry", data={"csrf": csrf, "seq": seq, "payload": "{}"}
        )
        assert refused.status_code == 400, (seq, refused.text)
        assert "invalid setting &#39;seq&#39;: " + says in refused.text, seq
    assert [e.kind for e in await app.history(task_id)] == ["received"]  # nothing else


async def test_creation_times_out_of_range_in_utc_are_a_400_and_the_ends_of_time_page(
    app: App, client: Client
) -> None:
    _register(app)
    ids = [await app.submit("orders.check", {"n": n}) for n in range(60)]
    http = client(create_dashboard(app, token=None))
    for query in ("from=0001-01-01T00:00%2B14:00", "to=9999-12-31T23:59-14:00"):
        refused = await http.get(f"/tasks?{query}")
        assert refused.status_code == 400, query
        assert "is out of range in UTC (years 1 to 9999)" in refused.text
    for query in (
        "from=0001-01-01T00:00",
        "from=0001-01-01T00:00-14:00&to=9999-12-31T23:59:59.999999",
        "to=9999-12-31T23:59%2B14:00&state=pending",
    ):
        first = await http.get(f"/tasks?{query}")
        assert first.status_code == 200, (query, first.text)
        found = re.search(r'href="(/tasks\?[^"]*before=[^"]*)"', first.text)
        assert found is not None, query
        second = await http.get(found[1].replace("&amp;", "&"))
        assert second.status_code == 200, (query, second.text)
        shown = {i for i in ids if i in first.text or i in second.text}
        assert shown == set(ids), query


@pytest.mark.parametrize(
    ("header", "host"),
    [
        ("Example.COM:8080", "example.com"),
        ("[::1]:8080", "::1"),
        ("[::1]", "::1"),
        ("127.0.0.1", "127.0.0.1"),
        ("x:", None),
        ("x:99999999", None),
        ("x:\uff18\uff10", None),  # digits, but not ASCII ones
        ("[::1", None),
        ("[::1]x", None),
        (":80", None),
        ("", None),
    ],
)
def test_a_host_header_is_read_as_its_name(header: str, host: str | None) -> None:
    assert host_of(header) == host


@pytest.mark.parametrize(
    ("scheme", "authority", "origin"),
    [
        ("https", "ops.example.com:443", "https://ops.example.com"),
        ("http", "ops.example.com:443", "http://ops.example.com:443"),
        ("HTTP", "[::1]:80", "http://[::1]"),
        ("ftp", "x", None),
        ("http", "x:y", None),
    ],
)
def test_an_origin_is_written_as_browsers_write_it(
    scheme: str, authority: str, origin: str | None
) -> None:
    assert origin_of(scheme, authority) == origin
