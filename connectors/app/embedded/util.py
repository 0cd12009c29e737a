"""Shared plumbing for the private test servers: ports, deadlines, process clean-up, names."""

from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

import psutil

T = TypeVar("T")

# Every server directory starts with this prefix so stale ones from crashed sessions can be found.
DIR_PREFIX = "tidemark-"
OWNER_FILE = "owner.pid"

_ports_lock = threading.Lock()
_handed_out: set[int] = set()


class HarnessError(RuntimeError):
    """A private server could not be started or controlled (message carries the server log tail)."""


def is_root() -> bool:
    return os.geteuid() == 0


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now, never handed out twice in one session.

    There is a window between closing the probe socket and the server binding it; the start
    functions retry on "address in use" to cover that race.
    """
    with _ports_lock:
        for _ in range(50):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            if port not in _handed_out:
                _handed_out.add(port)
                return port
    raise HarnessError("no free TCP port found")


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.2)
        return s.connect_ex((host, port)) == 0


# The longest pause a slow probe adds between two calls (the detection delay it may cost).
MAX_PROBE_PAUSE_S = 1.0


def wait_until(
    probe: Callable[[], T | None],
    timeout: float,
    what: str,
    interval: float = 0.05,
    on_timeout: Callable[[], str] | None = None,
    max_busy: float = 0.25,
) -> T:
    """Call ``probe`` until it returns something truthy or ``timeout`` seconds pass.

    Exceptions from the probe count as "not yet" (a server refusing connections while it starts),
    but the last one is reported if the deadline passes.

    Calls are ``interval`` apart, or further apart when the probe itself is slow, so that probing
    takes at most ``max_busy`` of the time (up to MAX_PROBE_PAUSE_S between calls): a probe that
    reads a table every 50 ms would take a core from the work it waits for. ``max_busy=1`` polls
    back to back. The last call is made at the deadline.
    """
    deadline = time.monotonic() + timeout
    last_exc: BaseException | None = None
    while True:
        began = time.monotonic()
        try:
            result = probe()
            if result:
                return result
        except HarnessError:
            raise
        except Exception as exc:  # noqa: BLE001 - any failure means "not ready yet"
            last_exc = exc
        ended = time.monotonic()
        if ended >= deadline:
            detail = f" (last error: {last_exc!r})" if last_exc else ""
            extra = f"\n{on_timeout()}" if on_timeout else ""
            raise HarnessError(f"timed out after {timeout:.0f}s waiting for {what}{detail}{extra}")
        spaced = min((ended - began) * (1 / max_busy - 1), MAX_PROBE_PAUSE_S)
        time.sleep(min(max(interval, spaced), deadline - ended))


def tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"(no log at {path})"
    return "\n".join(text.splitlines()[-lines:])


def run(
    cmd: Sequence[str], *, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 120
) -> str:
    """Run a command, returning stdout; raise HarnessError with its output on failure."""
    proc = subprocess.run(
        list(cmd),
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise HarnessError(f"command failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stdout[-4000:]}")
    return proc.stdout


def make_server_dir(kind: str, parent: Path | None, traversable_by: int | None = None) -> Path:
    """Create a fresh server directory ``<parent>/tidemark-<kind>-XXXX``.

    ``parent`` is used only when the socket path stays short (unix sockets are limited to ~107
    bytes) and, when ``traversable_by`` names a uid, when that user can reach it (pytest's
    ``/tmp/pytest-of-root`` is mode 0700, so the ``postgres`` user cannot). Otherwise the system
    temp directory is used.
    """
    base = Path(tempfile.gettempdir())
    if (
        parent is not None
        and len(str(parent)) <= 60
        and (traversable_by is None or _traversable(parent, traversable_by))
    ):
        base = parent
    base.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix=f"{DIR_PREFIX}{kind}-", dir=base))
    (path / OWNER_FILE).write_text(str(os.getpid()))
    return path


def _traversable(path: Path, uid: int) -> bool:
    import pwd

    gids = set(os.getgrouplist(pwd.getpwuid(uid).pw_name, pwd.getpwuid(uid).pw_gid))
    for p in [path.resolve(), *path.resolve().parents]:
        st = p.stat()
        if st.st_uid == uid:
            ok = st.st_mode & 0o100
        elif st.st_gid in gids:
            ok = st.st_mode & 0o010
        else:
            ok = st.st_mode & 0o001
        if not ok:
            return False
    return True


def kill_tree(pid: int, sig: int = signal.SIGKILL, timeout: float = 15) -> None:
    """Send ``sig`` to a process and all its descendants, then wait until they are gone.

    "Gone" includes zombies: an orphaned server is reaped by init whenever init gets to it,
    and psutil.wait_procs would wait for that.
    """
    try:
        root = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return
    try:
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        procs = [root]
    for p in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.send_signal(sig)
    deadline = time.monotonic() + timeout
    while any(_proc_alive(p) for p in procs):
        if time.monotonic() >= deadline:
            if sig == signal.SIGKILL:
                raise HarnessError(f"processes of pid {pid} survived SIGKILL")
            kill_tree(pid, signal.SIGKILL, timeout)
            return
        time.sleep(0.01)


def _proc_alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        p = psutil.Process(pid)
        return p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


# --- clean-up registry ------------------------------------------------------------------------


class Destroyable(Protocol):
    def destroy(self) -> None: ...


_live: list[Destroyable] = []
_live_lock = threading.Lock()


def register(server: Destroyable) -> None:
    with _live_lock:
        _live.append(server)


def unregister(server: Destroyable) -> None:
    with _live_lock, contextlib.suppress(ValueError):
        _live.remove(server)


@atexit.register
def destroy_all() -> None:
    """Last line of defence: fixtures' finalizers normally destroy servers first."""
    with _live_lock:
        servers = list(reversed(_live))
    for s in servers:
        with contextlib.suppress(Exception):
            s.destroy()


def remove_dir(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def reap_stale(
    pid_files: Sequence[str] = (
        "data/postmaster.pid",
        "mysqld.pid",
        "tansu.pid",
        "azurite.pid",
        "spark-master.pid",
        "spark-worker.pid",
    ),
) -> list[Path]:
    """Kill servers and remove directories left behind by test sessions that died (SIGKILL, OOM).

    Only directories whose owner pid is gone are touched, and a process is killed only if its
    command line or working directory is the server directory - never an unrelated process that
    reused the pid.
    """
    reaped: list[Path] = []
    tmp = Path(tempfile.gettempdir())
    for d in tmp.glob(f"{DIR_PREFIX}*"):
        owner = d / OWNER_FILE
        try:
            owner_pid = int(owner.read_text().strip())
        except (OSError, ValueError):
            continue
        if pid_alive(owner_pid):
            continue
        for name in pid_files:
            try:
                pid = int((d / name).read_text().split()[0])
                proc = psutil.Process(pid)
                ours = str(d) in " ".join(proc.cmdline()) or proc.cwd().startswith(str(d))
            except (OSError, ValueError, IndexError, psutil.Error):
                continue
            if ours:
                kill_tree(pid)
        remove_dir(d)
        reaped.append(d)
    return reaped


# --- names ------------------------------------------------------------------------------------

_names_lock = threading.Lock()
_names: set[str] = set()
_server_ids: set[int] = set()


def unique_name(prefix: str = "t") -> str:
    """A session-unique lower-case identifier, valid as a PG slot/publication, topic or table name."""
    clean = "".join(c if c.isalnum() else "_" for c in prefix.lower()).strip("_") or "t"
    with _names_lock:
        while True:
            name = f"{clean[:50]}_{secrets.token_hex(4)}"
            if name not in _names:
                _names.add(name)
                return name


def unique_server_id() -> int:
    """A random replica server id for a binlog client (must differ from the server's id 1)."""
    with _names_lock:
        while True:
            sid = 1000 + secrets.randbelow(2**31 - 2000)
            if sid not in _server_ids:
                _server_ids.add(sid)
                return sid


def popen_logged(
    cmd: Sequence[str], log: Path, env: dict[str, str] | None = None, **kw: Any
) -> subprocess.Popen:
    """Start a long-running server in its own session (so it can be killed as a group) logging to ``log``."""
    with open(log, "ab") as fh:
        return subprocess.Popen(
            list(cmd),
            stdout=fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=env,
            **kw,
        )
