"""`shepherd show` and `shepherd workers` at 80 columns: times of day and names are never cut.

Rendering only, with the values a real shop run leaves (agent names such as
`inventory.reserve`, a Kubernetes pod's instance name): every line fits 80
columns, a step's deadline keeps its time of day (its date too when it is not
today), an agent's and a role's names are whole, and a step's error that
does not fit its line goes under it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from shepherd.cli.render import COUNTERS, print_task, when
from shepherd.cli.render_ops import print_workers
from shepherd.core.records import Event, Step
from shepherd.core.states import ProcessState, StepKind, StepState
from shepherd.core.workers import Worker
from support.records import task_record

NOW = datetime(2026, 11, 28, 14, 36, 30, tzinfo=UTC)
AT = NOW - timedelta(seconds=18)  # 14:36:12Z
TASK_ID = "01a208d6011556a2c847"


@pytest.fixture(autouse=True)
def eighty_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")


def step(seq: int, agent: str, state: StepState, **changes: object) -> Step:
    fields: dict[str, object] = {"attempt": 1, "complete_by": AT + timedelta(seconds=5)}
    fields.update(changes)
    return Step(task_id=TASK_ID, seq=seq, agent=agent, state=state, **fields)  # type: ignore[arg-type]


def declined(*, complete_by: datetime = AT + timedelta(seconds=5)) -> None:
    """`show` of the tutorial's declined order (A-1002): charged, declined, reservation released."""
    task = task_record(
        id=TASK_ID,
        workflow="orders.process",
        key="A-1002",
        input={"id": "A-1002", "sku": "tea", "card": "declined", "amount": 900},
        process_state=ProcessState.COMPENSATED,
        lock_epoch=1,
        failure_count=0,
        created_at=AT,
        updated_at=AT,
        not_before=AT,
        error={"reason": "step 2 (payments.charge) failed permanently: card declined"},
        steps=(
            step(1, "inventory.reserve", StepState.COMPENSATED, complete_by=complete_by),
            step(
                2,
                "payments.charge",
                StepState.FAILED,
                attempt=3,
                error={"type": "PermanentError", "message": "card declined"},
            ),
            step(3, "inventory.release", StepState.COMPLETED, kind=StepKind.UNDO, compensates=1),
        ),
    )
    history = [
        Event(id=1, task_id=TASK_ID, key="A-1002", reply_to=None, kind=kind, detail=detail, at=AT)
        for kind, detail in (
            ("received", {"workflow": "orders.process"}),
            ("step_failed", {"seq": 2, "agent": "payments.charge", "attempt": 3}),
        )
    ]
    print_task(task, history, now=NOW)


def shown(capsys: pytest.CaptureFixture[str]) -> list[str]:
    out: str = capsys.readouterr().out
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80, "\n".join(lines)
    return lines


def section(lines: list[str], title: str) -> list[str]:
    start = lines.index(title) + 1
    end = lines.index("", start) if "" in lines[start:] else len(lines)
    return lines[start:end]


def test_show_keeps_the_time_of_day_and_the_agent_and_puts_the_error_under_its_step(
    capsys: pytest.CaptureFixture[str],
) -> None:
    declined()
    lines = shown(capsys)

    steps = section(lines, "steps")
    assert [line.split()[:6] for line in steps[:2]] == [
        ["seq", "kind", "agent", "state", "agent", "tries"],
        ["1", "forward", "inventory.reserve", "compensated", "1", "14:36:17Z"],
    ]
    assert steps[2].split() == ["2", "forward", "payments.charge", "failed", "3", "14:36:17Z"]
    assert steps[3].split() == ["error:", "card", "declined"]
    assert steps[3].startswith("     error: ")  # under the step's kind, not its seq
    assert steps[4].split() == ["3", "undo", "inventory.release", "completed", "1", "14:36:17Z"]
    assert steps[5] == COUNTERS
    history = section(lines, "history")
    assert history[1].split()[:2] == ["14:36:12Z", "received"]
    # The fields keep the date: the tables' times of day are that day's.
    assert "created_at     2026-11-28 14:36:12Z" in lines
    assert "task failures  0" in lines


def test_a_deadline_on_another_day_keeps_its_date_and_time(
    capsys: pytest.CaptureFixture[str],
) -> None:
    yesterday = NOW - timedelta(days=1)

    declined(complete_by=yesterday)
    steps = section(shown(capsys), "steps")

    assert when(yesterday) == "2026-11-27 14:36:30Z"
    assert steps[1].endswith("  2026-11-27 14:36:30Z")


def test_the_counters_say_what_they_count() -> None:
    assert COUNTERS.startswith("task failures: ")
    assert "agent tries: " in COUNTERS
    assert len(COUNTERS) <= 80


def worker(
    instance: str, roles: tuple[str, ...], agents: tuple[str, ...], **at: datetime
) -> Worker:
    host, pid, _ = instance.split(":")
    return Worker(
        instance=instance,
        host=host,
        pid=int(pid),
        roles=roles,
        agents=agents,
        started_at=at.get("started", NOW - timedelta(hours=2)),
        beat_at=at.get("beat", NOW - timedelta(seconds=1)),
    )


ALL = ("scheduler", "agent", "supervisor")
AGENTS = ("inventory.release", "inventory.reserve", "payments.charge", "payments.refund")


def test_workers_keep_every_role_whole_and_the_time_they_started(
    capsys: pytest.CaptureFixture[str],
) -> None:
    pods = [
        worker("orders-worker-7d9f8b6c4-x2kqz:1:3f9a", ALL, AGENTS),
        worker("orders-supervisor-5c8d7-qp2lm:1:77aa", ("supervisor",), ()),
        worker(
            "ip-10-0-12-34.ec2.internal:31877:0b3a",
            ("agent",),
            ("payments.charge",),
            started=NOW - timedelta(days=2),
            beat=NOW - timedelta(minutes=48),
        ),
    ]

    print_workers(pods, now=NOW, ttl=10.0)
    lines = shown(capsys)

    assert lines[0].split()[:3] == ["instance", "state", "last"]
    text = "\n".join(lines)
    words = text.replace(",", " ").split()
    for role in ALL:
        assert words.count(role) >= 1, text
    assert "12:36:30Z" in text  # started today: its time of day
    assert "2026-11-26 14:36:30Z" in text  # two days ago: its date and time
    for agent in AGENTS:
        assert agent in text
    assert "…" not in text
    first = lines[1].split()
    assert first[:4] == ["orders-worker-7d9f8b6c4-x2kqz:1:3f9a", "alive", "1s", "ago"]
    assert any(
        line.split()[:2] == ["ip-10-0-12-34.ec2.internal:31877:0b3a", "dead"] for line in lines
    )


def test_a_short_workers_table_is_one_line_per_process(capsys: pytest.CaptureFixture[str]) -> None:
    print_workers([worker("web-1:4242:9f1c", ALL, ())], now=NOW, ttl=10.0)

    assert [line.split() for line in shown(capsys)] == [
        ["instance", "state", "last", "beat", "started", "roles", "agents"],
        ["web-1:4242:9f1c", "alive", "1s", "ago", "12:36:30Z", "scheduler,agent,supervisor"],
    ]
