"""A PostgreSQL cluster of the fault tests' own, which they may stop, restart and cut off.

The suite's shared server (started by `scripts/test`) is never touched: other
tests use it. A `PgCluster` is initdb'd under `/tmp/shepherd-faults/<name>`
(trust authentication, fsync on: the durability users get), listens on its own
port, and is stopped and removed by `destroy`. PostgreSQL refuses to run as
root, so as root its programs run as the `postgres` OS user.

A cluster left behind by an earlier run that crashed is stopped and removed by
`create` before anything else (see also `remove_leftovers`).
"""

from __future__ import annotations

import glob
import os
import secrets
import shutil
import socket
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import final

import psycopg
from psycopg import sql

__all__ = ["PG_BIN", "ROOT", "FaultDb", "PgCluster", "remove_leftovers"]

#: Where every fault-test cluster lives, one directory per cluster.
ROOT = Path("/tmp/shepherd-faults")
#: The role the stores connect as.
ROLE = "shepherd"


def _pg_bin() -> Path:
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name or 0)
    )
    return Path(found[-1]) if found else Path("/usr/lib/postgresql/bin")


#: The newest installed PostgreSQL's programs.
PG_BIN = _pg_bin()


def _as_pg(
    argv: Sequence[str], *, cwd: Path, timeout: float = 120.0
) -> subprocess.CompletedProcess[str]:
    """Run a PostgreSQL program, as the `postgres` user when we are root."""
    prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    return subprocess.run(
        [*prefix, *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _port_answers(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1.0)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _stop_data_dir(data: Path) -> None:
    """Stop whatever server runs on `data` (immediate mode: it is being thrown away)."""
    if (data / "postmaster.pid").exists():
        _as_pg(
            [str(PG_BIN / "pg_ctl"), "stop", "-D", str(data), "-m", "immediate", "-w", "-t", "60"],
            cwd=data.parent,
        )


def remove_leftovers() -> None:
    """Stop and remove every cluster an earlier run left under ROOT."""
    if not ROOT.exists():
        return
    for directory in ROOT.iterdir():
        if (directory / "data").is_dir():
            _stop_data_dir(directory / "data")
        shutil.rmtree(directory, ignore_errors=True)


@final
class PgCluster:
    """One throwaway PostgreSQL cluster.

    Args:
        name: Its directory under ROOT.
        port: The TCP port it listens on.
        listen: The addresses it listens on (each must exist when it starts).
        trusted: Extra networks (CIDR) allowed to connect without a password,
            besides loopback.
    """

    def __init__(
        self,
        name: str,
        port: int,
        *,
        listen: Sequence[str] = ("127.0.0.1",),
        trusted: Sequence[str] = (),
    ) -> None:
        self.name = name
        self.port = port
        self.listen = tuple(listen)
        self.trusted = tuple(trusted)
        self.root = ROOT / name
        self.data = self.root / "data"
        self.log = self.root / "server.log"

    # -- life cycle ---------------------------------------------------------------
    def create(self) -> None:
        """initdb (removing what an earlier run left here), configure, start, add the role."""
        if not (PG_BIN / "initdb").exists():
            raise AssertionError(
                f"PostgreSQL is not installed: no {PG_BIN / 'initdb'} (run scripts/install)"
            )
        if self.data.is_dir():
            _stop_data_dir(self.data)
        shutil.rmtree(self.root, ignore_errors=True)
        self.root.mkdir(parents=True)
        ROOT.chmod(0o755)
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres")
        sockets = self.root / "run"
        done = _as_pg(
            [
                str(PG_BIN / "initdb"),
                "-D",
                str(self.data),
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--locale=C",
            ],
            cwd=self.root,
        )
        if done.returncode != 0:
            raise AssertionError(
                f"initdb {self.data} failed ({done.returncode}):\n{done.stdout}{done.stderr}"
            )
        _as_pg(["mkdir", "-p", str(sockets)], cwd=self.root)
        settings = {
            "listen_addresses": f"'{','.join(self.listen)}'",
            "port": str(self.port),
            "unix_socket_directories": f"'{sockets}'",
            "max_connections": "200",
            "fsync": "on",
            "log_line_prefix": "'%m [%p] %a '",
        }
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write("\n# the fault tests' settings\n")
            conf.writelines(f"{name} = {value}\n" for name, value in settings.items())
        with (self.data / "pg_hba.conf").open("a") as hba:
            hba.writelines(f"host all all {network} trust\n" for network in self.trusted)
        self.start()
        with self.admin() as conn:
            conn.execute(sql.SQL("CREATE ROLE {} LOGIN SUPERUSER").format(sql.Identifier(ROLE)))

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        if _port_answers(self.port):
            raise AssertionError(
                f"port {self.port} is already taken: the fault tests' cluster {self.name} "
                "cannot start there (is another server using it?)"
            )
        self._pg_ctl("start", "-l", str(self.log), "-w", "-t", "60")
        self._check_listening()

    def _check_listening(self) -> None:
        """Fail, with the server's log, if it runs but does not answer on 127.0.0.1.

        PostgreSQL starts when it could bind at least one of its listen
        addresses: a loopback port taken meanwhile (say, as a client's source
        port) would otherwise surface later as "connection refused".
        """
        if not _port_answers(self.port):
            raise AssertionError(
                f"the fault tests' cluster {self.name} started but does not answer on "
                f"127.0.0.1:{self.port}; server log:\n{self.log_tail()}"
            )

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (`mode`: smart, fast or immediate) and wait until it is down."""
        self._pg_ctl("stop", "-m", mode, "-w", "-t", "60")

    def restart(self, mode: str = "fast") -> None:
        """`pg_ctl restart -m mode`: stop, then start again with the same settings."""
        self._pg_ctl("restart", "-m", mode, "-l", str(self.log), "-w", "-t", "60")
        self._check_listening()

    def running(self) -> bool:
        return (
            _as_pg(
                [str(PG_BIN / "pg_ctl"), "status", "-D", str(self.data)], cwd=self.root
            ).returncode
            == 0
        )

    def destroy(self) -> None:
        """Stop the server (immediate mode) and remove the cluster's directory."""
        if self.data.is_dir():
            _stop_data_dir(self.data)
        shutil.rmtree(self.root, ignore_errors=True)

    def _pg_ctl(self, *args: str) -> None:
        done = _as_pg(
            [str(PG_BIN / "pg_ctl"), *args[:1], "-D", str(self.data), *args[1:]], cwd=self.root
        )
        if done.returncode != 0:
            raise AssertionError(
                f"pg_ctl {' '.join(args)} failed ({done.returncode}): {done.stdout}{done.stderr}\n"
                f"server log:\n{self.log_tail()}"
            )

    def log_tail(self, lines: int = 30) -> str:
        """The end of the server's log."""
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no server log)"

    # -- databases ------------------------------------------------------------------
    def url(self, dbname: str, *, host: str = "127.0.0.1", port: int | None = None) -> str:
        """The URL of database `dbname`, reached at `host` (and `port`: a proxy's)."""
        return f"postgresql://{ROLE}@{host}:{self.port if port is None else port}/{dbname}"

    def admin(self) -> psycopg.Connection[tuple[object, ...]]:
        """An autocommit connection to the `postgres` database, as the superuser."""
        return psycopg.connect(
            f"postgresql://postgres@127.0.0.1:{self.port}/postgres",
            autocommit=True,
            connect_timeout=5,
        )

    def create_database(self) -> str:
        """A new empty database owned by the role; returns its name."""
        name = f"faults_{secrets.token_hex(5)}"
        with self.admin() as conn:
            conn.execute(
                sql.SQL("CREATE DATABASE {} OWNER {}").format(
                    sql.Identifier(name), sql.Identifier(ROLE)
                )
            )
        return name

    def drop_database(self, name: str) -> None:
        with self.admin() as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )

    def terminate_backends(self, dbname: str) -> int:
        """End every session on `dbname` (as an operator would); return how many."""
        with self.admin() as conn:
            rows = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                (dbname,),
            ).fetchall()
        return sum(1 for (ended,) in rows if ended)


@final
@dataclass(frozen=True)
class FaultDb:
    """A database of a PgCluster, for one test."""

    cluster: PgCluster
    name: str

    @property
    def url(self) -> str:
        return self.cluster.url(self.name)
