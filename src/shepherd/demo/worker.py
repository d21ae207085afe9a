"""The `--crash` worker: a subprocess hosting the scheduler and agent roles.

`Worker.start` spawns `python -m shepherd.demo --worker` (plus the demo's
logging options) with the store URL in `SHEPHERD_STORE` and the demo's options
in `SHEPHERD_DEMO_OPTIONS`, so that the subprocess rebuilds the very same app
(`shepherd.demo.app.app_from_env`), and waits for its readiness line on stdout.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO, final

from shepherd.demo.app import OPTIONS_ENV, DemoFailed, DemoOptions

READY = "shepherd-demo-worker ready"
WORKER_START_SECONDS = 30.0


@final
class Worker:
    """A worker subprocess hosting the scheduler and agent roles."""

    def __init__(self, proc: asyncio.subprocess.Process, log: Path, log_file: IO[bytes]) -> None:
        self.proc = proc
        self.log = log
        self._log_file = log_file

    @classmethod
    async def start(
        cls, store: str, options: DemoOptions, workdir: Path, args: Sequence[str] = ()
    ) -> Worker:
        """Spawn `python -m shepherd.demo --worker *args` and wait for its readiness line."""
        log = workdir / f"worker-{options.generation}.log"
        log_file = log.open("wb")
        env = {**os.environ, "SHEPHERD_STORE": store, OPTIONS_ENV: options.to_json()}
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "shepherd.demo", "--worker", *args,
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=log_file, env=env,
        )  # fmt: skip
        worker = cls(proc, log, log_file)
        assert proc.stdout is not None
        try:
            line = await asyncio.wait_for(proc.stdout.readline(), WORKER_START_SECONDS)
        except TimeoutError:
            line = b""
        if line.decode(errors="replace").strip() != READY:
            await worker.stop(signal.SIGKILL)
            raise DemoFailed(f"the worker did not become ready:\n{worker.tail()}")
        return worker

    def tail(self, lines: int = 20) -> str:
        """The end of the worker's log."""
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:]) or "(the worker wrote nothing)"

    def check(self) -> None:
        """Raise DemoFailed if the worker has exited on its own."""
        if self.proc.returncode is not None:
            raise DemoFailed(f"the worker exited with {self.proc.returncode}:\n{self.tail()}")

    async def stop(self, how: signal.Signals = signal.SIGTERM) -> None:
        """Send `how` and wait for the process to end (SIGKILL after 10 s)."""
        if self.proc.returncode is None:
            os.kill(self.proc.pid, how)
            try:
                await asyncio.wait_for(self.proc.wait(), 10.0)
            except TimeoutError:
                os.kill(self.proc.pid, signal.SIGKILL)
                await self.proc.wait()
        self._log_file.close()


async def run_worker() -> int:
    """The worker subprocess: scheduler and agent roles until SIGTERM (or SIGKILL).

    Its logs go to stderr (the caller's log file), as the command line set them up.
    Ctrl-C is left to the demo's main process, which stops its workers; a worker
    whose parent has gone stops by itself.
    """
    from shepherd.demo.app import app_from_env

    app = app_from_env()
    main = asyncio.current_task()
    assert main is not None
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, main.cancel)
    loop.add_signal_handler(signal.SIGINT, lambda: None)
    parent = os.getppid()

    async def orphaned() -> None:
        while os.getppid() == parent:  # noqa: ASYNC110 - nothing to wait on but the pid
            await asyncio.sleep(0.5)
        main.cancel()

    watchdog = asyncio.create_task(orphaned())
    try:
        async with app:
            await app.run(("scheduler", "agent"), ready=lambda: print(READY, flush=True))
    except asyncio.CancelledError:
        return 0
    finally:
        watchdog.cancel()
    return 0
