"""Wake-ups between processes sharing one SQLite file: a datagram socket per open store.

Every open store binds a Unix datagram socket in a folder beside the database
(`<file>.wake/`). After each commit it sends the channels it rang, encoded by
`store.wakeups`, to every other socket there; the event loop reads its own
socket (no thread, no polling) and rings the same local channels. A socket left
by a dead process refuses and is removed; a peer whose queue is full is sent
its channels again shortly. Polling stays the safety net: a failure here never
fails a write, it only makes another process wait for its next poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hashlib
import logging
import os
import secrets
import socket
import stat
import tempfile
import time
from collections.abc import Collection, Iterable
from typing import TYPE_CHECKING, final

from shepherd.store.wakeups import local_channels, notifications

if TYPE_CHECKING:
    from shepherd.store.signals import Signals

__all__ = ["Wakeups", "channels_of", "datagrams", "wake_folder"]

log = logging.getLogger("shepherd.store.sqlite")

#: The most bytes one datagram carries (well under a socket's send buffer).
MAX_DATAGRAM = 60 * 1024
#: Rung as a whole: every local waiter wakes (what a long-full peer is owed).
EVERYTHING = "*"
#: Channels owed to one peer before it is owed EVERYTHING instead.
_OWED_LIMIT = 4096
# A full peer is tried again after 1 ms, doubling up to 50 ms, about a second in all.
_RETRY_FIRST = 0.001
_RETRY_MAX = 0.05
_RETRIES = 25
# The longest socket path the kernel takes (sun_path, less its final NUL byte).
_SUN_PATH_MAX = 107
# "<pid>-<8 hex>.sock", the pid at most 7 digits.
_NAME_MAX = len("4194304-01234567.sock")
# A folder listing taken this long after the folder's last change is trusted
# until it changes again: file-system clocks tick coarsely.
_SETTLED_NS = 2_000_000_000
# Datagrams read per wake of the loop, so a flood cannot starve it.
_DRAIN_MAX = 256


def wake_folder(db_path: str) -> str:
    """The folder of the sockets of every store open on `db_path`.

    `<real path of the file>.wake`; if a socket's path there would exceed the
    kernel's limit, `shepherd-<uid>/<hash of the real path>.wake` in the temp
    directory instead (processes sharing such a file must share `TMPDIR`).
    """
    real = os.path.realpath(db_path)
    beside = real + ".wake"
    if len(os.fsencode(beside)) + 1 + _NAME_MAX <= _SUN_PATH_MAX:
        return beside
    digest = hashlib.sha256(os.fsencode(real)).hexdigest()[:16]
    return os.path.join(_private_root(), f"{digest}.wake")


def _private_root() -> str:
    """This user's folder in the temp directory, for the folders of long database paths."""
    return os.path.join(tempfile.gettempdir(), f"shepherd-{os.getuid()}")


def datagrams(rings: Collection[str]) -> list[bytes]:
    """The datagrams announcing `rings`: lines of `channel payload`, each at most MAX_DATAGRAM."""
    if EVERYTHING in rings:
        return [EVERYTHING.encode()]
    grams: list[bytes] = []
    lines: list[bytes] = []
    size = 0
    for channel, payload in notifications(rings, max_payload=MAX_DATAGRAM - 64):
        line = f"{channel} {payload}".encode()
        if lines and size + 1 + len(line) > MAX_DATAGRAM:
            grams.append(b"\n".join(lines))
            lines, size = [], 0
        lines.append(line)
        size += len(line) + 1
    if lines:
        grams.append(b"\n".join(lines))
    return grams


def channels_of(datagram: bytes) -> list[str]:
    """The local channels `datagram` rings (`[EVERYTHING]` for every one)."""
    text = datagram.decode(errors="replace")
    if text == EVERYTHING:
        return [EVERYTHING]
    rung: list[str] = []
    for line in text.split("\n"):
        channel, _, payload = line.partition(" ")
        rung.extend(local_channels(channel, payload))
    return rung


@final
class Wakeups:
    """This store's socket: rings what other processes announce, announces what it commits.

    Each other store on the file is sent to through a socket connected to its
    own: its send buffer is that peer's alone, so a peer that stopped reading
    holds up no other, and a peer whose process died refuses at once.

    Args:
        db_path: The database file.
        signals: The store's local channels.
    """

    def __init__(self, db_path: str, signals: Signals) -> None:
        self.db_path = db_path
        self._signals = signals
        self._sock: socket.socket | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.folder = ""
        self.path = ""
        #: Peer socket path -> a socket connected to it.
        self._peers: dict[str, socket.socket] = {}
        self._listed_mtime_ns = -1
        self._listing_racy = True
        #: Peer -> channels it could not take yet (its queue was full).
        self._owed: dict[str, set[str]] = {}
        self._retry: asyncio.TimerHandle | None = None
        self._retries = 0
        self._warned = False
        self.sent = 0
        self.received = 0
        self.deferred = 0

    @property
    def listening(self) -> bool:
        """Whether this store's socket is bound and read."""
        return self._sock is not None

    def open(self) -> None:
        """Bind this store's socket and read it on the running loop; on failure, warn and go on.

        Sockets left in the folder by processes that died are removed.
        """
        if self._sock is not None or not hasattr(socket, "AF_UNIX") or self.db_path == ":memory:":
            return
        try:
            self.folder = wake_folder(self.db_path)
            sock, self.path = _bind(self.folder)
        except OSError as exc:
            log.warning(
                "no wake-ups from other processes on %s (%s): their writes are seen at the "
                "next poll",
                self.db_path,
                exc,
            )
            return
        self._loop = asyncio.get_running_loop()
        self._sock = sock
        self._loop.add_reader(sock.fileno(), self._receive)
        self._list_peers()

    def close(self) -> None:
        """Stop reading, remove this store's socket, and its folder if it was the last."""
        sock, self._sock = self._sock, None
        if sock is None:
            return
        loop, self._loop = self._loop, None
        if loop is not None and not loop.is_closed():
            loop.remove_reader(sock.fileno())
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
        self._owed.clear()
        for peer in self._peers.values():
            peer.close()
        self._peers.clear()
        self._listed_mtime_ns = -1
        sock.close()
        with contextlib.suppress(OSError):
            os.unlink(self.path)
        with contextlib.suppress(OSError):  # not empty: another store still uses it
            os.rmdir(self.folder)

    def statistics(self) -> dict[str, float]:
        """Datagrams sent and received, sends deferred because a peer was full, peers owed now."""
        return {
            "wakeups_sent": self.sent,
            "wakeups_received": self.received,
            "wakeups_deferred": self.deferred,
            "wakeups_owed": len(self._owed),
        }

    def announce(self, rings: Collection[str]) -> None:
        """Send `rings` (just committed and rung here) to every other store on the file."""
        if self._sock is None or not rings:
            return
        peers = list(self._list_peers())
        grams = datagrams(rings) if peers else []
        for peer in peers:
            owed = self._owed.pop(peer, None)
            if owed is None:
                self._send(peer, grams, rings)
            else:
                owed.update(rings)
                self._send(peer, datagrams(owed), owed)

    def _send(self, peer: str, grams: list[bytes], rings: Collection[str]) -> None:
        conn = self._peers.get(peer)
        if conn is None:
            return
        for gram in grams:
            try:
                conn.send(gram)
            except BlockingIOError:  # its queue is full: send again shortly
                self._owe(peer, rings)
                return
            except OSError as exc:
                if isinstance(exc, ConnectionRefusedError) or exc.errno == errno.ENOTCONN:
                    self._forget(peer)  # its process is gone
                else:
                    self._warn_once(f"cannot wake another process through {peer}: {exc}")
                return
            self.sent += 1

    def _owe(self, peer: str, rings: Collection[str]) -> None:
        self.deferred += 1
        owed = self._owed.setdefault(peer, set())
        owed.update(rings)
        if len(owed) > _OWED_LIMIT:
            owed.clear()
            owed.add(EVERYTHING)
        if self._retry is None:
            self._retry = asyncio.get_running_loop().call_later(
                min(_RETRY_FIRST * 2**self._retries, _RETRY_MAX), self._send_owed
            )

    def _send_owed(self) -> None:
        self._retry = None
        owed, self._owed = self._owed, {}
        self._retries += 1
        if self._retries > _RETRIES:
            # A peer that reads nothing for so long is stuck: its next poll finds the work.
            log.debug("giving up waking %d stuck peers; they poll", len(owed))
            self._retries = 0
            return
        for peer, rings in owed.items():
            self._send(peer, datagrams(rings), rings)
        if not self._owed:
            self._retries = 0

    def _forget(self, peer: str) -> None:
        log.debug("removing the wake-up socket of a process that is gone: %s", peer)
        with contextlib.suppress(OSError):
            os.unlink(peer)
        conn = self._peers.pop(peer, None)
        if conn is not None:
            conn.close()
        self._owed.pop(peer, None)

    def _list_peers(self) -> Iterable[str]:
        """The other sockets in the folder, listed again only when it changed (one stat)."""
        try:
            mtime_ns = os.stat(self.folder).st_mtime_ns
        except OSError:
            return ()
        if mtime_ns != self._listed_mtime_ns or self._listing_racy:
            try:
                names = os.listdir(self.folder)
            except OSError:
                return ()
            self._listing_racy = time.time_ns() - mtime_ns < _SETTLED_NS
            self._listed_mtime_ns = mtime_ns
            own = os.path.basename(self.path)
            listed = {
                os.path.join(self.folder, name)
                for name in names
                if name.endswith(".sock") and name != own
            }
            for gone in self._peers.keys() - listed:
                self._peers.pop(gone).close()
                self._owed.pop(gone, None)
            for peer in listed - self._peers.keys():
                conn = _connect(peer)
                if conn is not None:
                    self._peers[peer] = conn
        return self._peers.keys()

    def _receive(self) -> None:
        sock = self._sock
        if sock is None:
            return
        rung: set[str] = set()
        for _ in range(_DRAIN_MAX):
            try:
                gram = sock.recv(MAX_DATAGRAM)
            except BlockingIOError:
                break
            except OSError as exc:
                self._warn_once(f"cannot read wake-ups from other processes: {exc}")
                break
            self.received += 1
            rung.update(channels_of(gram))
        if EVERYTHING in rung:
            self._signals.ring_all()
            return
        for channel in rung:
            self._signals.ring(channel)

    def _warn_once(self, message: str) -> None:
        if self._warned:
            log.debug("%s", message)
            return
        self._warned = True
        log.warning("%s (polling finds the work meanwhile)", message)


def _bind(folder: str) -> tuple[socket.socket, str]:
    """A non-blocking datagram socket bound to a fresh name in `folder` (created if missing)."""
    attempts = 0
    while True:
        attempts += 1
        _make_folder(folder)
        path = os.path.join(folder, f"{os.getpid()}-{secrets.token_hex(4)}.sock")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            sock.setblocking(False)
            sock.bind(path)
        except FileNotFoundError:  # the last other store removed the folder meanwhile
            sock.close()
            if attempts == 3:
                raise
            continue
        except BaseException:
            sock.close()
            raise
        return sock, path


def _make_folder(folder: str) -> None:
    """Create `folder` (mode 0700); in the temp directory, refuse a root not ours alone."""
    root = _private_root()
    if os.path.dirname(folder) == root:
        with contextlib.suppress(FileExistsError):
            os.mkdir(root, 0o700)
        info = os.lstat(root)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
            raise PermissionError(f"{root} is not a folder of this user alone")
    with contextlib.suppress(FileExistsError):
        os.mkdir(folder, 0o700)


def _connect(peer: str) -> socket.socket | None:
    """A non-blocking socket connected to `peer`; None if its process is gone (then it is removed).

    Connecting sends nothing: it only tells whether a process still reads there.
    """
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        conn.setblocking(False)
        conn.connect(peer)
    except (ConnectionRefusedError, FileNotFoundError):
        conn.close()
        log.debug("removing the wake-up socket of a process that is gone: %s", peer)
        with contextlib.suppress(OSError):
            os.unlink(peer)
        return None
    except OSError as exc:  # another user's socket, say: not ours to judge
        conn.close()
        log.debug("cannot wake the store behind %s: %s", peer, exc)
        return None
    return conn
