"""Harness for the runnable docs: read code blocks out of Markdown, run console sessions.

A console session is the `console` blocks of one page, in order. Each `$ ` line
is a command; the lines after it, up to the next `$ `, are what it prints. The
commands run in a directory holding copies of the page's files, with
`.venv/bin` first on PATH (as after `. .venv/bin/activate`):

- `shepherd run ...` and `shepherd worker ...` (after optional `NAME=value`
  environment settings) start the worker in the background, as in a second
  terminal. A worker already running is stopped first with SIGINT, as by
  Ctrl-C. What the page shows is the worker's readiness line.
- Any other command runs to its end; its stdout and stderr, merged, are what
  the page shows. It must exit 0, unless what it prints has an `error:` line.
  The one-shot `shepherd` commands in `IN_PROCESS` run in the test's process
  (support.cli_inprocess), the same arguments in the same environment and
  directory; every other command is a process of its own.
- A `text` block holds lines the running worker logs: the session waits, with
  a deadline, until the worker's stderr has each of them.

`Normaliser` is the one place where volatile parts are replaced before outputs
are compared; nothing else is forgiven.
"""

from __future__ import annotations

import os
import queue
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from support.cli_inprocess import run_in_process
from support.processes import pump_lines

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
#: The virtualenv's bin directory: `python`, and the `shepherd` console script.
VENV_BIN = Path(sys.executable).parent

#: The `shepherd` commands a session runs in its own process (support.cli_inprocess):
#: one-shot commands whose output is the point. The others (`bench`, `demo`,
#: `dashboard`, `top`, `python ...`) start a process, as on the page.
IN_PROCESS = frozenset(
    {
        "alerts",
        "breakers",
        "cancel",
        "partitions",
        "purge",
        "resources",
        "retry",
        "show",
        "submit",
        "tasks",
        "tokens",
        "workers",
    }
)
#: Seconds a command may take before the session fails.
COMMAND_TIMEOUT = 60.0
#: Seconds a worker may take to print its readiness line, or to stop after SIGINT.
READY_TIMEOUT = 30.0
#: Seconds the session waits for the worker to log a line the page shows.
LOG_TIMEOUT = 90.0


@dataclass(frozen=True)
class Block:
    """A fenced code block: its info string (`python`, `console`, ...) and its text."""

    info: str
    text: str
    line: int


def code_blocks(markdown: str, info: str | None = None) -> list[Block]:
    """The fenced code blocks of `markdown`, in order; only those tagged `info` if given.

    Fences may be indented (inside a list item); the indentation is removed
    from the block's lines.
    """
    blocks = []
    for found in re.finditer(
        r"^(?P<indent>[ \t]*)```(?P<info>\S*)[^\n]*\n(?P<body>.*?)^(?P=indent)```[ \t]*$",
        markdown,
        re.MULTILINE | re.DOTALL,
    ):
        indent = len(found["indent"])
        body = "".join(line[indent:] for line in found["body"].splitlines(keepends=True))
        if info is None or found["info"] == info:
            line = markdown.count("\n", 0, found.start()) + 1
            blocks.append(Block(info=found["info"], text=body, line=line))
    return blocks


# -- normalising ----------------------------------------------------------------
#: A task id: 12 hex digits of milliseconds and 8 random ones.
TASK_ID = re.compile(r"\b[0-9a-f]{20}\b")
#: An instant as the CLI prints it (2026-11-22 05:06:51Z), as logs print it
#: (2026-11-22 05:06:51,123) and in ISO 8601 (2026-11-22T05:06:51.123456+00:00).
INSTANT = re.compile(r"\b\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:\d\d)?")
#: An instant of today, as a table shows it: its time of day only (05:06:51Z).
TIME_OF_DAY = re.compile(r"\b\d\d:\d\d:\d\dZ")
#: An instant a narrow table column cut short (`2026-11-23 1…`): whatever digits
#: are left depend on the time of day.
CUT_INSTANT = re.compile(r"\b\d{4}-\d\d-\d\d[ T][\d:]*…")
#: A role instance, `host:pid:suffix`, optionally with its role (`/s`, `/a`, `/v`).
INSTANCE = re.compile(r"\b[A-Za-z0-9][A-Za-z0-9.-]*:\d+:[0-9a-f]{4}\b")
#: A role instance and the rest of its line, or the owner a `claimed` event names:
#: a table cuts that line at a place that depends on the instance's length.
AFTER_INSTANCE = re.compile(r'(?:<instance>|"owner":").*$', re.MULTILINE)
#: A process id where a worker table or a log line names one (`pid 4242`).
PID = re.compile(r"\bpid \d+\b")
#: A duration the CLI measured (`in 0.42s`, `3s ago`).
ELAPSED = re.compile(r"\b\d+(?:\.\d+)?(?:ms|s) ago\b")


@dataclass
class Normaliser:
    """Replaces the parts of an output that differ between runs, and nothing else.

    - task ids become `<id1>`, `<id2>`, ... numbered in order of first appearance,
      separately for the page and for the run, so that the same id must come back
      where the page shows the same id (a resubmitted key is the same task);
    - instants, dated or a time of day, become `<time>` (`<time>…` when a
      table cut one short), pids
      `pid <pid>`;
    - a role instance (`host:pid:suffix`) and whatever follows it on its line
      become `<instance>…`: a table cuts such a line at a place that depends
      on the instance's length (the owner in a `claimed` event's detail too);
    - runs of spaces become one space and trailing spaces go, because table
      columns are as wide as their widest (volatile) value.
    """

    shown: dict[str, int] = field(default_factory=dict)
    real: dict[str, int] = field(default_factory=dict)

    def page(self, text: str) -> str:
        """Normalise what the page shows (new ids are numbered)."""
        return self._normalise(text, self.shown, learn=True)

    def run(self, text: str, *, learn: bool = True) -> str:
        """Normalise what a command printed (new ids are numbered only if `learn`)."""
        return self._normalise(text, self.real, learn=learn)

    def command(self, line: str) -> str:
        """The page's command line with each id it shows replaced by the run's id."""
        by_number = {n: task_id for task_id, n in self.real.items()}

        def swap(found: re.Match[str]) -> str:
            number = self.shown.get(found[0])
            if number is None or number not in by_number:
                raise AssertionError(f"the page uses id {found[0]} before any output shows it")
            return by_number[number]

        return TASK_ID.sub(swap, line)

    @staticmethod
    def _normalise(text: str, ids: dict[str, int], *, learn: bool) -> str:
        def number(found: re.Match[str]) -> str:
            if found[0] not in ids:
                if not learn:
                    return "<id?>"
                ids[found[0]] = len(ids) + 1
            return f"<id{ids[found[0]]}>"

        text = INSTANT.sub("<time>", text)
        text = TIME_OF_DAY.sub("<time>", text)
        text = CUT_INSTANT.sub("<time>…", text)
        text = INSTANCE.sub("<instance>", text)
        text = AFTER_INSTANCE.sub("<instance>…", text)
        text = TASK_ID.sub(number, text)
        text = PID.sub("pid <pid>", text)
        text = ELAPSED.sub("<elapsed> ago", text)
        lines = [re.sub(r" {2,}", " ", line).rstrip() for line in text.splitlines()]
        while lines and not lines[-1]:
            lines.pop()
        return "\n".join(lines)


# -- console sessions -----------------------------------------------------------
@dataclass(frozen=True)
class Command:
    """One `$ ` line of a console block and the lines the page shows after it."""

    line: str
    expected: str
    where: int


@dataclass(frozen=True)
class LogLines:
    """A `text` block: lines the running worker logs."""

    text: str
    where: int


def session_steps(markdown: str) -> list[Command | LogLines]:
    """The console commands and worker log lines of a page, in page order."""
    steps: list[Command | LogLines] = []
    for block in code_blocks(markdown):
        if block.info == "text":
            steps.append(LogLines(block.text, block.line))
        if block.info != "console":
            continue
        line: str | None = None
        output: list[str] = []
        start = block.line
        for n, text in enumerate(block.text.splitlines(), start=block.line + 1):
            if text.startswith("$ "):
                if line is not None:
                    steps.append(Command(line, "\n".join(output), start))
                line, output, start = text[2:], [], n
            elif line is None:
                raise AssertionError(f"line {n}: console output before any `$ ` command")
            else:
                output.append(text)
        if line is not None:
            steps.append(Command(line, "\n".join(output), start))
    return steps


@dataclass
class Worker:
    """A `shepherd run`/`worker` process started by a session, as in another terminal."""

    process: subprocess.Popen[str]
    stderr_path: Path
    lines: queue.Queue[str | None] = field(default_factory=queue.Queue)
    pump: threading.Thread | None = None

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def first_line(self) -> str:
        """Its first line on stdout (the readiness line), waited for with a deadline."""
        try:
            line = self.lines.get(timeout=READY_TIMEOUT)
        except queue.Empty:
            raise AssertionError(
                f"the worker printed nothing within {READY_TIMEOUT} s; stderr:\n{self.stderr()}"
            ) from None
        if line is None:
            code = self.process.wait(READY_TIMEOUT)
            raise AssertionError(f"the worker exited {code}; stderr:\n{self.stderr()}")
        return line

    def interrupt(self) -> int:
        """Ctrl-C: SIGINT, then wait for it to exit; return its exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        try:
            return self.process.wait(READY_TIMEOUT)
        finally:
            self.close()

    def close(self) -> None:
        """Kill it if it still runs; reap it and close its pipe."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(READY_TIMEOUT)
        if self.pump is not None:
            self.pump.join(READY_TIMEOUT)
        if self.process.stdout is not None:
            self.process.stdout.close()


@dataclass
class Session:
    """Runs a page's console session in `cwd`, comparing every output with the page."""

    cwd: Path
    normaliser: Normaliser = field(default_factory=Normaliser)
    worker: Worker | None = None
    workers: list[Worker] = field(default_factory=list)
    #: What ran and what it printed, for failure messages.
    transcript: list[str] = field(default_factory=list)
    #: Whether a difference from the page fails at once (else the transcript has it).
    strict: bool = True
    #: Seconds to wait for the worker to log what a `text` block shows.
    log_timeout: float = LOG_TIMEOUT

    def env(self, extra: dict[str, str]) -> dict[str, str]:
        """The environment of a command: no SHEPHERD_* settings, the venv first on PATH."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("SHEPHERD_")}
        env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
        env["PYTHONUNBUFFERED"] = "1"
        env["COLUMNS"] = "80"  # tables fit the terminal: the page shows an 80-column one
        env.update(extra)
        return env

    def play(self, steps: list[Command | LogLines]) -> None:
        for step in steps:
            if isinstance(step, LogLines):
                self.wait_logged(step)
            else:
                self.execute(step)

    def execute(self, command: Command) -> None:
        line = self.normaliser.command(command.line)
        words = shlex.split(line)
        extra = {}
        while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
            name, _, value = words.pop(0).partition("=")
            extra[name] = value
        expected = self.normaliser.page(command.expected)
        if words[:1] == ["shepherd"] and words[1:2] in (["run"], ["worker"]):
            got = self.start_worker(words, extra)
        else:
            got = self.run_to_end(words, extra, expected)
        self.transcript.append(f"$ {line}\n{got}")
        actual = self.normaliser.run(got)
        assert actual == expected or not self.strict, (
            f"line {command.where}: `{command.line}` printed\n{actual}\n\n"
            f"but the page shows\n{expected}\n\nsession so far:\n" + "\n".join(self.transcript)
        )

    def run_to_end(self, words: list[str], extra: dict[str, str], expected: str) -> str:
        if words[:1] == ["shepherd"] and words[1:2] and words[1] in IN_PROCESS:
            done = run_in_process(words[1:], cwd=self.cwd, env=self.env(extra), merged=True)
        else:
            done = subprocess.run(
                words,
                cwd=self.cwd,
                env=self.env(extra),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=COMMAND_TIMEOUT,
                check=False,
            )
        failed = any(line.startswith("error:") for line in expected.splitlines())
        assert (done.returncode != 0) == failed or not self.strict, (
            f"`{shlex.join(words)}` exited {done.returncode}; it printed:\n{done.stdout}"
        )
        return done.stdout

    def start_worker(self, words: list[str], extra: dict[str, str]) -> str:
        if self.worker is not None:
            self.worker.interrupt()
        stderr_path = self.cwd / f"worker-{len(self.workers) + 1}.log"
        with stderr_path.open("w") as stderr:
            process = subprocess.Popen(
                words,
                cwd=self.cwd,
                env=self.env(extra),
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
            )
        worker = Worker(process=process, stderr_path=stderr_path)
        self.workers.append(worker)
        self.worker = worker
        assert process.stdout is not None
        worker.pump = threading.Thread(target=pump_lines, args=(process.stdout, worker.lines))
        worker.pump.start()
        return worker.first_line()

    def wait_logged(self, logged: LogLines) -> None:
        """Wait until the running worker has logged every line of `logged`."""
        assert self.worker is not None, f"line {logged.where}: no worker runs to log this"
        wanted = self.normaliser.page(logged.text).splitlines()
        deadline = time.monotonic() + self.log_timeout
        while True:
            seen = set(self.normaliser.run(self.worker.stderr(), learn=False).splitlines())
            missing = [line for line in wanted if line not in seen]
            if not missing:
                return
            if time.monotonic() > deadline or self.worker.process.poll() is not None:
                if not self.strict:
                    self.transcript.append(self.worker.stderr())
                    return
                raise AssertionError(
                    f"line {logged.where}: the worker did not log\n"
                    + "\n".join(missing)
                    + f"\nwithin {self.log_timeout} s; it logged:\n{self.worker.stderr()}"
                )
            time.sleep(0.1)  # a poll of the log file, bounded by the deadline above

    def close(self) -> None:
        for worker in self.workers:
            worker.close()


def main(argv: list[str]) -> None:
    """`python tests/docs/doctools.py PAGE [FILE...]`: play PAGE's session, print what ran.

    The session runs in a fresh temporary directory holding copies of FILEs,
    without stopping at a difference: its transcript is what the page should show.
    """
    import shutil
    import tempfile

    page, *files = argv
    with tempfile.TemporaryDirectory() as cwd:
        for name in files:
            shutil.copy(name, cwd)
        session = Session(cwd=Path(cwd), strict=False, log_timeout=30.0)
        try:
            session.play(session_steps(Path(page).read_text()))
        finally:
            session.close()
            print("\n\n".join(session.transcript))


if __name__ == "__main__":
    main(sys.argv[1:])
