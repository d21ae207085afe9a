"""Real worker processes for the recovery tests: spawn, wait for readiness, SIGKILL.

A worker runs `tests/support/worker_app.py` in a fresh interpreter. Its stdout
carries the readiness line; its stderr goes to a file that failure messages quote.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, final

WORKER_APP = Path(__file__).with_name("worker_app.py")


@final
@dataclass
class Worker:
    """One running worker process."""

    name: str
    process: subprocess.Popen[str]
    stderr_path: Path
    _lines: queue.Queue[str | None] = field(default_factory=queue.Queue, repr=False)
    _pump: threading.Thread | None = field(default=None, repr=False)
    #: The stdout lines read so far, the readiness line but.
    _printed: list[str] = field(default_factory=list, repr=False)
    _terminated: bool = field(default=False, repr=False)

    @property
    def pid(self) -> int:
        return self.process.pid

    def stderr(self, tail: int = 4000) -> str:
        """The end of what the worker wrote to stderr."""
        try:
            return self.stderr_path.read_text(errors="replace")[-tail:]
        except FileNotFoundError:
            return ""

    def wait_ready(self, timeout: float) -> None:
        """Block until the worker prints its readiness line, or fail after `timeout` s."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(
                    f"worker {self.name} not ready within {timeout} s; stderr:\n{self.stderr()}"
                )
            try:
                line = self._lines.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                raise AssertionError(
                    f"worker {self.name} exited ({self.process.wait()}) before it was ready; "
                    f"stderr:\n{self.stderr()}"
                )
            # worker_app.py prints `ready <pid>`; `shepherd run` prints `shepherd ready: ...`.
            if line.split()[:1] == ["ready"] or line.startswith("shepherd ready:"):
                return
            self._printed.append(line)

    def printed(self) -> list[str]:
        """Every line the worker has printed to stdout so far, but its readiness line."""
        while True:
            try:
                line = self._lines.get_nowait()
            except queue.Empty:
                return list(self._printed)
            if line is not None:
                self._printed.append(line)

    def terminate(self) -> None:
        """SIGTERM the worker, once (a second one could cut its clean stop short)."""
        if not self._terminated and self.process.poll() is None:
            os.kill(self.pid, signal.SIGTERM)
        self._terminated = True

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM the worker (unless done) and wait for it to exit, and for its stdout.

        Returns its exit code.
        """
        self.terminate()
        code = self.process.wait(timeout)
        if self._pump is not None:
            self._pump.join(timeout)  # every line it printed is read once the pipe ends
        return code

    def kill(self, timeout: float = 10.0) -> None:
        """SIGKILL the worker (no clean-up runs in it) and reap it."""
        if self.process.poll() is None:
            os.kill(self.pid, signal.SIGKILL)
        self.process.wait(timeout)

    def close(self, timeout: float = 10.0) -> None:
        """Kill the worker if needed, then let its stdout reader finish and close the pipe."""
        self.kill(timeout)
        if self._pump is not None:
            self._pump.join(timeout)  # the pipe is at EOF once the process is gone
        if self.process.stdout is not None:
            self.process.stdout.close()

    def alive(self) -> bool:
        return self.process.poll() is None

    def freeze(self) -> None:
        """SIGSTOP the worker: every thread of it stops where it is."""
        os.kill(self.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        """SIGCONT the worker: it goes on from where it stopped."""
        os.kill(self.pid, signal.SIGCONT)

    def stopped(self) -> bool:
        """Whether the worker is stopped by a signal now (state `T` in /proc)."""
        return stopped(self.pid)


def stopped(pid: int) -> bool:
    """Whether process `pid` is stopped by a signal now (state `T` in /proc/<pid>/stat)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    # "pid (comm) S ...": the state follows the last ')' (comm may hold spaces and parens).
    return stat.rpartition(")")[2].split()[:1] == ["T"]


def pump_lines(stream: IO[str], lines: queue.Queue[str | None]) -> None:
    """Put each line of `stream` on `lines` (without its newline); None marks its end."""
    try:
        for line in stream:
            lines.put(line.rstrip("\n"))
    finally:
        lines.put(None)


def _forward_lines(stream: IO[str], lines: queue.Queue[str | None]) -> None:
    """Forward the worker's stdout lines; None marks its end."""
    try:
        for line in stream:
            lines.put(line.strip())
    finally:
        lines.put(None)


def spawn_worker(
    store_url: str,
    workdir: Path,
    *,
    name: str,
    roles: str = "scheduler,agent,supervisor",
    log_path: Path | None = None,
    ready_timeout: float = 20.0,
    script: Path = WORKER_APP,
    settings: Mapping[str, float | str] | None = None,
    **options: float | str,
) -> Worker:
    """Start a worker process on `store_url` and wait until its roles run.

    Args:
        store_url: The shared SQLite (or PostgreSQL) store.
        workdir: Where its stderr file goes.
        name: A name for messages and file names.
        roles: Comma-separated roles.
        log_path: The agent's execution log.
        ready_timeout: Seconds to wait for the readiness line.
        script: The worker script (default: `worker_app.py`).
        settings: Options of the script, as a mapping (for options built as data).
        **options: `pace`, `claim_batch`, `max_in_flight`, `agent_concurrency`,
            `supervisor_interval`, `poll_interval`.
    """
    argv = [sys.executable, str(script), store_url, "--roles", roles]
    if log_path is not None:
        argv += ["--log", str(log_path)]
    for option, value in {**(settings or {}), **options}.items():
        argv += [f"--{option.replace('_', '-')}", str(value)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHEPHERD_")}
    return start_process(argv, workdir, name=name, env=env, ready_timeout=ready_timeout)


def start_process(
    argv: list[str], workdir: Path, *, name: str, env: dict[str, str], ready_timeout: float
) -> Worker:
    """Start `argv` (stderr to `<workdir>/<name>.stderr`) and wait for its readiness line."""
    stderr_path = workdir / f"{name}.stderr"
    with stderr_path.open("w") as stderr:
        process = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=stderr, text=True, env=env, cwd=workdir
        )
    worker = Worker(name=name, process=process, stderr_path=stderr_path)
    assert process.stdout is not None
    worker._pump = threading.Thread(
        target=_forward_lines,
        args=(process.stdout, worker._lines),
        name=f"{name}-stdout",
        daemon=True,
    )
    worker._pump.start()
    try:
        worker.wait_ready(ready_timeout)
    except BaseException:
        worker.close()
        raise
    return worker


@contextmanager
def workers() -> Iterator[list[Worker]]:
    """Collect workers; every one still alive at the end is SIGKILLed and reaped."""
    started: list[Worker] = []
    try:
        yield started
    finally:
        for worker in started:
            worker.close()


def as_from_a_terminal() -> None:
    """`preexec_fn`: SIGINT at its default in the child, as a terminal starts it.

    A suite run as a shell's background job (`... &`, `nohup`) inherits SIGINT
    ignored, and a process started with it ignored keeps ignoring it.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)
