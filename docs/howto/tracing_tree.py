"""Print one task's trace as a tree of spans, read from every process's spans file."""

import json
import sys
import time
from pathlib import Path
from typing import Any

task_id = sys.argv[1]


def read() -> list[dict[str, Any]]:
    """Every span written so far, with the pid of the process that wrote it."""
    spans = []
    for path in sorted(Path().glob("spans-*.jsonl")):
        pid = path.stem.removeprefix("spans-")
        for line in path.read_text().splitlines():
            spans.append({**json.loads(line), "pid": pid})
    return spans


# A span is written when it ends, and a task's run ends just after the task does:
# look again for a few seconds until the run's span is there.
deadline = time.monotonic() + 10
while True:
    spans = read()
    (submit,) = [
        s
        for s in spans
        if s["name"] == "shepherd.submit" and s["attributes"]["shepherd.task_id"] == task_id
    ]
    mine = [s for s in spans if s["context"]["trace_id"] == submit["context"]["trace_id"]]
    if any(s["name"].startswith("shepherd.task") for s in mine) or time.monotonic() > deadline:
        break
    time.sleep(0.1)

children: dict[str | None, list[dict[str, Any]]] = {}
for span in sorted(mine, key=lambda s: s["start_time"]):
    children.setdefault(span["parent_id"], []).append(span)


def show(span: dict[str, Any], depth: int) -> None:
    status = span["status"]["status_code"]
    print(
        f"{'  ' * depth}{span['name']} (pid {span['pid']}){'' if status == 'UNSET' else ' ' + status}"
    )
    for child in children.get(span["context"]["span_id"], []):
        show(child, depth + 1)


show(submit, 0)
