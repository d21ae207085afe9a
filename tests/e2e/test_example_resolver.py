"""The resolver example runs as its README says: a partition moved live while traffic runs.

Real processes on a SQLite store, in a copy of `examples/resolver`: the
README's commands map six users to two partitions on two databases, a
`shepherd run` worker runs the app, the example's traffic script streams
rounds of visits (one `ctx.call(..., entity="user-N")` workflow per user),
and `shepherd partitions move` puts partition p0 on a third database while
the rounds run. No sleeps: the test reads the traffic's rounds as they end,
each with a deadline.

What must hold: rounds that ended before the move wrote p0's users in
users-1.db; once a round shows one of them in users-3.db, every later round
does (the worker's resolver learnt of the move and never goes back); p1's
users never move; every visit is in exactly one database, the one its step's
recorded resolution names (`App.get_task`, and `shepherd show` for two of
them), so the visits written before the move stayed where they were.
"""

from __future__ import annotations

import asyncio
import os
import queue
import re
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from shepherd import App
from support.processes import pump_lines, start_process, workers

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "resolver"
#: The virtualenv's bin directory: `python` and `shepherd`, as after activating it.
VENV_BIN = Path(sys.executable).parent

#: Seconds to wait for a round, a command or a process before failing (a backstop).
PATIENCE = 60.0
#: Rounds the traffic must end before the move, and after the first moved one.
ROUNDS_BEFORE = 3
ROUNDS_AFTER = 3

EVEN = ("user-0", "user-2", "user-4")  # partition p0: users-db-1, then users-db-3
ODD = ("user-1", "user-3", "user-5")  # partition p1: users-db-2 throughout
FILES = {"users-db-1": "users-1.db", "users-db-2": "users-2.db", "users-db-3": "users-3.db"}

ROUND = re.compile(r"round (\d+): (.*)")
#: A visit's row: (task id, user, round, partition, resource).
Row = tuple[str, str, int, str, str]
#: A round as the traffic prints it: its number and each user's resource.
Round = tuple[int, dict[str, str]]


def blocks(info: str) -> list[str]:
    """The README's fenced blocks tagged `info`, in order."""
    text = (EXAMPLE / "README.md").read_text()
    pattern = rf"^```{info}\n(?P<body>.*?)^```$"
    return [found["body"] for found in re.finditer(pattern, text, re.MULTILINE | re.DOTALL)]


def parse_round(line: str) -> Round:
    """`round 7: user-0=users-db-1 ...` as (7, {"user-0": "users-db-1", ...})."""
    found = ROUND.fullmatch(line)
    assert found is not None, f"not a round: {line!r}"
    places = {user: place for user, _, place in (part.partition("=") for part in found[2].split())}
    assert sorted(places) == sorted(EVEN + ODD), line
    return int(found[1]), places


def environment() -> dict[str, str]:
    """No SHEPHERD_* settings (the store is shepherd.db in the example's folder), the venv first."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHEPHERD_")}
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONUNBUFFERED"] = "1"
    env["COLUMNS"] = "200"
    return env


def run(argv: list[str], cwd: Path) -> str:
    """Run a command of the README to its end; it must exit 0. Its stdout."""
    done = subprocess.run(
        argv,
        cwd=cwd,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=PATIENCE,
        check=False,
    )
    assert done.returncode == 0, (shlex.join(argv), done.stdout, done.stderr)
    return done.stdout


class Traffic:
    """The traffic script, its rounds read as it prints them."""

    def __init__(self, argv: list[str], cwd: Path) -> None:
        self.stderr_path = cwd / "traffic.stderr"
        with self.stderr_path.open("w") as stderr:
            self.process = subprocess.Popen(
                argv, cwd=cwd, env=environment(), stdout=subprocess.PIPE, stderr=stderr, text=True
            )
        assert self.process.stdout is not None
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.pump = threading.Thread(target=pump_lines, args=(self.process.stdout, self.lines))
        self.pump.start()

    def line(self) -> str | None:
        """Its next line (None at its end), waited for with a deadline."""
        try:
            return self.lines.get(timeout=PATIENCE)
        except queue.Empty:
            pytest.fail(f"the traffic printed nothing for {PATIENCE} s:\n{self.stderr()}")

    def next_round(self) -> Round:
        line = self.line()
        if line is None:
            pytest.fail(f"the traffic ended ({self.process.wait(PATIENCE)}):\n{self.stderr()}")
        return parse_round(line)

    def interrupt(self) -> tuple[int, list[str]]:
        """Ctrl-C: it ends the round in progress; its exit code and the lines it printed since."""
        self.process.send_signal(signal.SIGINT)
        code = self.process.wait(PATIENCE)
        rest = []
        while (line := self.line()) is not None:
            rest.append(line)
        return code, rest

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(PATIENCE)
        self.pump.join(PATIENCE)
        if self.process.stdout is not None:
            self.process.stdout.close()


def rows_of(cwd: Path) -> dict[str, list[Row]]:
    """Each database's visits, by resource name (none for a database never written)."""
    found: dict[str, list[Row]] = {}
    for resource, name in FILES.items():
        path = cwd / name
        if not path.exists():
            found[resource] = []
            continue
        with closing(sqlite3.connect(path)) as db:
            query = "SELECT task_id, user, round, partition, resource FROM visits"
            found[resource] = [
                (str(t), str(u), int(r), str(p), str(s)) for t, u, r, p, s in db.execute(query)
            ]
    return found


async def recorded_resolutions(store: str, task_ids: list[str]) -> dict[str, Any]:
    """Each task's one step's recorded resolution, as JSON."""
    out = {}
    async with App(store, alerts=()) as app:
        for task_id in task_ids:
            (step,) = (await app.get_task(task_id)).steps
            assert step.resolution is not None, task_id
            out[task_id] = step.resolution.to_json()
    return out


def test_the_readme_shows_lines_the_scripts_print() -> None:
    """The README's sample outputs have the shape the scripts print (numbers aside)."""
    traffic_sample, where_sample = blocks("text")
    for line in traffic_sample.splitlines():
        parse_round(line)
    assert where_sample.splitlines()[-1].endswith(
        " visits, each in the database its step's recorded resolution names"
    )


def test_a_partition_moved_while_traffic_runs_takes_later_visits_only(tmp_path: Path) -> None:
    for path in EXAMPLE.glob("*.py"):
        shutil.copy(path, tmp_path)
    setup, worker_line, traffic_line, move_line, where_line = blocks("bash")
    assert worker_line.strip() == "shepherd run --app users:app"
    assert traffic_line.strip().startswith("python traffic.py")
    assert move_line.strip() == "shepherd partitions move p0 users-db-3"
    assert where_line.strip() == "python where.py"

    mapped = run(["bash", "-euo", "pipefail", "-c", setup], tmp_path)

    assert mapped.splitlines() == [
        "partition 'p0' created on resource 'users-db-1'",
        "partition 'p1' created on resource 'users-db-2'",
        *(f"entity 'user-{n}' assigned to partition 'p{n % 2}'" for n in range(6)),
    ]

    with workers() as started:
        worker = start_process(
            shlex.split(worker_line),
            tmp_path,
            name="worker",
            env=environment(),
            ready_timeout=PATIENCE,
        )
        started.append(worker)
        traffic = Traffic(shlex.split(traffic_line), tmp_path)
        try:
            before = [traffic.next_round() for _ in range(ROUNDS_BEFORE)]
            moved = run(shlex.split(move_line), tmp_path)
            after = [traffic.next_round()]
            deadline = time.monotonic() + PATIENCE
            while not all(after[-1][1][user] == "users-db-3" for user in EVEN):
                assert time.monotonic() < deadline, f"no round after the move used it: {after}"
                after.append(traffic.next_round())
            after += [traffic.next_round() for _ in range(ROUNDS_AFTER)]
            code, rest = traffic.interrupt()
        finally:
            traffic.close()
        worker.process.send_signal(signal.SIGTERM)
        assert worker.process.wait(PATIENCE) == 0, worker.stderr()

    # The move waits for the visits in flight on users-db-1, if any, and says so.
    assert re.fullmatch(
        r"partition 'p0' moved from resource 'users-db-1' to 'users-db-3' "
        r"\(3 entities(, after \d+ steps? in flight on 'users-db-1' ended)?\)\n",
        moved,
    ), moved
    assert code == 0, traffic.stderr()
    *tail, last = rest
    rounds = [*before, *after, *(parse_round(line) for line in tail)]
    assert [number for number, _ in rounds] == list(range(1, len(rounds) + 1))
    assert last == f"{len(rounds)} rounds"

    # The odd users never moved; the even ones moved once, at one round, for good.
    assert all(places[user] == "users-db-2" for _, places in rounds for user in ODD)
    assert all(places[user] == "users-db-1" for _, places in before for user in EVEN)
    first = next(n for n, places in rounds if "users-db-3" in {places[u] for u in EVEN})
    for number, places in rounds:
        even = {places[user] for user in EVEN}
        if number < first:
            assert even == {"users-db-1"}, (number, places)
        elif number > first:
            assert even == {"users-db-3"}, (number, places)
        else:
            assert even <= {"users-db-1", "users-db-3"}, (number, places)

    # Every visit is in one database, the one its round printed and its row names.
    rows = rows_of(tmp_path)
    printed = {(user, number): place for number, places in rounds for user, place in places.items()}
    where = {
        (user, number): resource for resource in FILES for _, user, number, _, _ in rows[resource]
    }
    assert sum(len(found) for found in rows.values()) == len(printed)
    assert where == printed
    for resource, found in rows.items():
        for _, user, _, partition, named in found:
            assert (named, partition) == (resource, "p0" if user in EVEN else "p1")

    # ... and the one its step's recorded resolution names: a later move changed no step.
    task_of = {
        (user, number): task_id for found in rows.values() for task_id, user, number, _, _ in found
    }
    store = f"sqlite:///{tmp_path / 'shepherd.db'}"
    recorded = asyncio.run(recorded_resolutions(store, list(task_of.values())))
    for (user, number), task_id in task_of.items():
        resolution = recorded[task_id]
        resource = printed[(user, number)]
        assert resolution["entity"] == user
        assert resolution["partition"] == ("p0" if user in EVEN else "p1")
        assert resolution["resource"]["name"] == resource
        assert resolution["resource"]["info"] == {"path": FILES[resource]}

    # `shepherd show` shows it: a visit of user-0 before the move, and one after.
    for number, resource in ((1, "users-db-1"), (len(rounds), "users-db-3")):
        task_id = task_of[("user-0", number)]
        shown = run(["shepherd", "show", task_id], tmp_path)
        table = shown.split("\nresolutions\n", 1)[1].split("\n\n", 1)[0].splitlines()
        assert table[0].split() == ["seq", "entity", "partition", "resource", "info"]
        assert table[1].split() == [
            "1",
            "user-0",
            "p0",
            resource,
            f'{{"path":"{FILES[resource]}"}}',
        ]

    # The example's own check agrees, and prints what the README shows (numbers aside).
    checked = run(shlex.split(where_line), tmp_path).splitlines()
    _, sample = blocks("text")
    assert [re.sub(r"\d+", "N", line) for line in checked] == [
        re.sub(r"\d+", "N", line) for line in sample.splitlines()
    ]
    assert checked[-1].startswith(f"{len(printed)} visits, ")
