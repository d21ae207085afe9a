"""`app.schedule(...)`: checked when declared, before anything is stored; declared once."""

from __future__ import annotations

from typing import Any

import pytest

from shepherd import App, ConfigError, WorkflowContext
from shepherd.core.schedules import CatchUp


def _app() -> App:
    app = App("sqlite:///:memory:")

    @app.workflow("report")
    async def report(ctx: WorkflowContext, data: Any) -> Any:
        return data  # pragma: no cover

    return app


def test_a_declared_schedule_is_kept_for_the_store_checked() -> None:
    app = _app()
    schedule = app.schedule("nightly", workflow="report", cron="0 2 * * *", catch_up="latest")
    assert schedule.catch_up is CatchUp.LATEST
    assert app.schedules == {"nightly": schedule}
    # The same declaration again is the same schedule; other values are refused.
    assert (
        app.schedule("nightly", workflow="report", cron="0 2 * * *", catch_up="latest") == schedule
    )
    with pytest.raises(ConfigError, match="declared twice"):
        app.schedule("nightly", workflow="report", cron="0 3 * * *")


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"workflow": "nope", "every": 1}, "unknown workflow 'nope'"),
        ({"workflow": "report", "cron": "0 2 * *"}, "is not a cron expression"),
        ({"workflow": "report", "every": 1, "timezone": "Europe/Atlantis"}, "unknown timezone"),
        ({"workflow": "report", "every": 1, "cron": "* * * * *"}, "exactly one of cron and every"),
        ({"workflow": "report", "every": float("inf")}, "finite"),
        ({"workflow": "report", "every": 1, "catch_up": "most"}, "catch_up must be one of"),
        ({"workflow": "report", "every": 1, "max_catch_up": -1}, "max_catch_up must be from 1"),
        ({"workflow": "report", "every": 1, "data": {"x": float("nan")}}, "schedule 'bad'"),
    ],
)
def test_a_bad_declaration_is_refused_and_nothing_is_kept(
    fields: dict[str, Any], words: str
) -> None:
    app = _app()
    with pytest.raises(ConfigError, match="schedule 'bad'") as caught:
        app.schedule("bad", **fields)
    assert words in str(caught.value)
    assert app.schedules == {}
