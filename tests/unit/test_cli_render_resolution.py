"""What `shepherd show` says of a step's recorded resolution: a table of its own, and `--json`."""

from __future__ import annotations

import json

import pytest

from shepherd.cli.render import echo_json, print_task, resolution_rows, task_json
from shepherd.core.records import Step, Task
from shepherd.core.resources import Resolution, Resource
from shepherd.core.states import ProcessState, StepKind, StepState
from support.records import task_record

TASK_ID = "01a208d352cf79e7f72c"
DB1 = Resource(name="orders-db-1", kind="sqlite", info={"path": "orders-1.db"}, capacity=3)
AT_DB1 = Resolution(entity="user-42", partition="p0", resource=DB1)


def task(*steps: Step) -> Task:
    return task_record(
        id=TASK_ID,
        workflow="orders.process",
        input={},
        process_state=ProcessState.COMPENSATED,
        lock_epoch=1,
        steps=steps,
    )


def step(
    seq: int,
    agent: str,
    resolution: Resolution | None,
    *,
    kind: StepKind = StepKind.FORWARD,
    compensates: int | None = None,
) -> Step:
    return Step(
        task_id=TASK_ID,
        seq=seq,
        agent=agent,
        state=StepState.COMPLETED,
        kind=kind,
        compensates=compensates,
        resolution=resolution,
    )


#: A call for an entity, one for none, and the first one's undo (sent with its resolution).
STEPS = (
    step(1, "orders.write", AT_DB1),
    step(2, "email.send", None),
    step(3, "orders.erase", AT_DB1, kind=StepKind.UNDO, compensates=1),
)


def test_each_step_with_a_resolution_is_a_row_entity_partition_resource() -> None:
    assert resolution_rows(task(*STEPS)) == [
        ("1", "user-42", "p0", "orders-db-1", '{"path":"orders-1.db"}'),
        ("3", "user-42", "p0", "orders-db-1", '{"path":"orders-1.db"}'),
    ]
    assert resolution_rows(task(step(1, "email.send", None))) == []


def test_show_prints_the_resolutions_after_the_steps(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "100")

    print_task(task(*STEPS), [])

    out = capsys.readouterr().out
    assert out.index("\nsteps\n") < out.index("\nresolutions\n") < out.index("\nhistory\n")
    table = out.split("\nresolutions\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert [line.split() for line in table] == [
        ["seq", "entity", "partition", "resource", "info"],
        ["1", "user-42", "p0", "orders-db-1", '{"path":"orders-1.db"}'],
        ["3", "user-42", "p0", "orders-db-1", '{"path":"orders-1.db"}'],
    ]


def test_a_narrow_terminal_keeps_the_resource_whole(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "40")

    print_task(task(*STEPS), [])

    table = capsys.readouterr().out.split("\nresolutions\n", 1)[1].split("\n\n", 1)[0]
    assert all("orders-db-1" in line for line in table.splitlines()[1:])


def test_a_task_without_resolutions_shows_no_table(capsys: pytest.CaptureFixture[str]) -> None:
    print_task(task(step(1, "email.send", None)), [])

    assert "resolutions" not in capsys.readouterr().out


def test_show_json_gives_each_step_its_resolution_or_null(
    capsys: pytest.CaptureFixture[str],
) -> None:
    echo_json(task_json(task(*STEPS), []))

    steps = json.loads(capsys.readouterr().out)["steps"]
    assert [s["resolution"] for s in steps] == [AT_DB1.to_json(), None, AT_DB1.to_json()]
    assert steps[0]["resolution"] == {
        "entity": "user-42",
        "partition": "p0",
        "resource": {
            "name": "orders-db-1",
            "kind": "sqlite",
            "info": {"path": "orders-1.db"},
            "capacity": 3,
            "rate": None,
        },
    }
    assert Resolution.from_json(steps[2]["resolution"]) == AT_DB1
