"""Worker "hosts" as network namespaces, each linked to this one by a veth pair.

Host i is the namespace `shfault-<letter>`; its veth pair is `shf<letter>-r`
(here, the root side) and `shf<letter>-n` (inside it), a /30 of 10.213.77.0/24:
host a is 10.213.77.2 and reaches this side at 10.213.77.1, host b is
10.213.77.6 and reaches 10.213.77.5. A namespace has no other route, so its
processes can reach nothing but this machine's side of its own link.

A `blackhole 10.213.77.0/24` route with a high metric stays here for as long as
the hosts exist: if a link is down or gone, traffic for the subnet is dropped
here instead of following the default route off the machine.

Setting a host's link down (`cut`) drops its traffic silently: no reset reaches
the other side. Everything is removed on exit, also when the test fails, and
what an earlier run that crashed left behind is removed before anything is made.
"""

from __future__ import annotations

import os
import signal
import string
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import final

__all__ = ["SUBNET", "Host", "hosts", "remove_leftovers", "require_root"]

SUBNET = "10.213.77.0/24"
_NET = "10.213.77."
_NS_PREFIX = "shfault-"
_LINK_PREFIX = "shf"
_BLACKHOLE = ["blackhole", SUBNET, "metric", "4000"]


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=False)
    if check and done.returncode != 0:
        raise AssertionError(
            f"ip {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}"
        )
    return done


@final
@dataclass(frozen=True)
class Host:
    """One namespace and its link to this side."""

    name: str
    root_link: str
    ns_link: str
    #: This side's address on the link: what the host connects to.
    root_addr: str
    #: The host's own address.
    ns_addr: str

    def exec_prefix(self, *, hostname: str | None = None) -> list[str]:
        """The argv prefix that runs a program inside the namespace.

        With `hostname`, the program also gets a UTS namespace of its own with
        that host name (`socket.gethostname()` returns it), as on another machine.
        """
        prefix = ["ip", "netns", "exec", self.name]
        if hostname is not None:
            # sh sets the name, then execs the program: its pid is the one started here.
            prefix += ["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', hostname]
        return prefix

    def cut(self) -> None:
        """Set the host's side of the link down: its packets go nowhere, silently."""
        _ip("-n", self.name, "link", "set", self.ns_link, "down")

    def heal(self) -> None:
        """Set the host's side of the link up again."""
        _ip("-n", self.name, "link", "set", self.ns_link, "up")

    def pids(self) -> list[int]:
        """Processes running inside the namespace."""
        done = _ip("netns", "pids", self.name, check=False)
        return [int(p) for p in done.stdout.split() if p.isdigit()]


def _namespaces() -> list[str]:
    listed = _ip("netns", "list", check=False).stdout.splitlines()
    return [line.split()[0] for line in listed if line.startswith(_NS_PREFIX)]


def _links() -> list[str]:
    names = []
    for line in _ip("-o", "link", "show", check=False).stdout.splitlines():
        # "12: shfa-r@if11: <...>"
        name = line.split(":")[1].strip().split("@")[0] if ":" in line else ""
        if name.startswith(_LINK_PREFIX) and name.endswith(("-r", "-n")):
            names.append(name)
    return names


def _remove_namespace(name: str) -> None:
    pids = _ip("netns", "pids", name, check=False).stdout.split()
    for pid in pids:  # processes an earlier run left in its own namespace
        with suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)
    _ip("netns", "del", name, check=False)


def remove_leftovers() -> None:
    """Remove the namespaces, links and route that a run (maybe a crashed one) made."""
    for name in _namespaces():
        _remove_namespace(name)
    for link in _links():
        _ip("link", "del", link, check=False)
    while _ip("route", "del", *_BLACKHOLE, check=False).returncode == 0:
        pass


def require_root() -> None:
    if os.geteuid() != 0:
        raise AssertionError(
            "this fault test needs root (it makes network namespaces and veth links); "
            "run the suite as root"
        )


@contextmanager
def hosts(count: int = 2) -> Iterator[list[Host]]:
    """Make `count` hosts (at most 26); remove them all on exit."""
    require_root()
    remove_leftovers()
    made: list[Host] = []
    try:
        _ip("route", "add", *_BLACKHOLE)
        for i in range(count):
            letter = string.ascii_lowercase[i]
            host = Host(
                name=f"{_NS_PREFIX}{letter}",
                root_link=f"{_LINK_PREFIX}{letter}-r",
                ns_link=f"{_LINK_PREFIX}{letter}-n",
                root_addr=f"{_NET}{4 * i + 1}",
                ns_addr=f"{_NET}{4 * i + 2}",
            )
            _ip("netns", "add", host.name)
            made.append(host)
            _ip(
                "link",
                "add",
                host.root_link,
                "type",
                "veth",
                "peer",
                "name",
                host.ns_link,
                "netns",
                host.name,
            )
            _ip("addr", "add", f"{host.root_addr}/30", "dev", host.root_link)
            _ip("link", "set", host.root_link, "up")
            _ip("-n", host.name, "addr", "add", f"{host.ns_addr}/30", "dev", host.ns_link)
            _ip("-n", host.name, "link", "set", host.ns_link, "up")
            _ip("-n", host.name, "link", "set", "lo", "up")
        yield made
    finally:
        for host in made:
            _remove_namespace(host.name)
            _ip("link", "del", host.root_link, check=False)
        remove_leftovers()
