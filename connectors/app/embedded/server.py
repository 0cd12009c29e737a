"""The lifecycle every private server shares: one server process on a free port in its own
directory, started with retries when another process took the port between probe and bind,
stopped cleanly or killed with its children, destroyed with its directory.

A server class says what differs: the command (`_command`), when it is ready (`_probe`),
its names for messages and its files; `launch` creates, registers and starts one.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import ClassVar, TypeVar

from .util import (
    HarnessError,
    free_port,
    kill_tree,
    popen_logged,
    register,
    remove_dir,
    tail,
    unregister,
    wait_until,
)

S = TypeVar("S", bound="EmbeddedServer")

# What the servers log when their port is taken: PostgreSQL, MariaDB and Node (Azurite) print
# strerror's "Address already in use", Rust (tansu) "Address in use".
_PORT_TAKEN = ("address already in use", "address in use")


class EmbeddedServer:
    """A private server process. Subclasses implement `_command` and `_probe` and set the names."""

    label: ClassVar[str] = "server"  # in "waiting for <label> on port N"
    process_name: ClassVar[str] = "server"  # in "<process_name> exited with code N"
    start_timeout: ClassVar[float] = 60.0
    stop_timeout: ClassVar[float] = 60.0
    # Written with the process id for `reap_stale`, by servers that write no pid file themselves.
    pid_file: ClassVar[str | None] = None

    def __init__(self, base_dir: Path, logfile: Path, output: Path | None = None) -> None:
        self.base_dir = base_dir
        self.logfile = logfile  # the server's own log: tails in errors, "address in use"
        self._output = output or logfile  # where its stdout/stderr go
        self.port = free_port()
        self._proc: subprocess.Popen | None = None
        self._started = False  # the port may change only before the first successful start
        self._log_start = 0  # the log's size when the current start began
        self.startup_seconds: float = 0.0  # last start() only
        self.setup_seconds: float = 0.0  # init + first start + provision

    # --- what a server class says ----------------------------------------------------------

    def _command(self) -> list[str]:
        raise NotImplementedError

    def _env(self) -> dict[str, str] | None:
        return None  # the caller's environment

    def _probe(self) -> bool:
        """Whether the server answers clients (exceptions count as "not yet")."""
        raise NotImplementedError

    def _before_stop(self) -> None:
        """Close the server's own clients before it goes away (none by default)."""

    def _halt(self) -> None:
        """A quick clean stop before `destroy` kills what is left (none by default)."""

    def init(self) -> None:
        """Create the server's files before its first start (nothing by default)."""

    def provision(self) -> None:
        """After the first start: the users and databases the suite expects (none by default)."""

    # --- lifecycle -------------------------------------------------------------------------

    def setup(self) -> None:
        """Everything before the first client connects: init, first start, provision."""
        t0 = time.monotonic()
        self.init()
        self.start()
        self.provision()
        self.setup_seconds = time.monotonic() - t0

    def start(self) -> None:
        """Start (or start again after stop/kill) on the same port and directory. Before the
        first successful start, a port another process took meanwhile is replaced (twice at most)."""
        t0 = time.monotonic()
        for attempt in range(3):
            self._log_start = self.logfile.stat().st_size if self.logfile.exists() else 0
            self._proc = popen_logged(self._command(), self._output, env=self._env(), cwd=self.base_dir)
            if self.pid_file:
                (self.base_dir / self.pid_file).write_text(str(self._proc.pid))
            try:
                wait_until(self._ready, self.start_timeout, f"{self.label} on port {self.port}")
                break
            except HarnessError as exc:
                self.kill()
                if attempt < 2 and not self._started and self._port_taken():
                    self.port = free_port()
                    continue
                raise HarnessError(f"{exc}\n--- {self.logfile} ---\n{tail(self.logfile)}") from None
        self._started = True
        self.startup_seconds = time.monotonic() - t0

    def _port_taken(self) -> bool:
        """Whether the log written since this start began says the port was in use."""
        try:
            with open(self.logfile, "rb") as fh:
                fh.seek(self._log_start)
                new_log = fh.read().decode(errors="replace")
        except OSError:
            return False
        low = new_log.lower()
        return any(m in low for m in _PORT_TAKEN)

    def _ready(self) -> bool:
        proc = self._proc
        if proc is not None and proc.poll() is not None:
            raise HarnessError(f"{self.process_name} exited with code {proc.returncode}")
        if self._port_taken():  # some servers (tansu) keep running without their listener
            raise HarnessError(f"{self.process_name} could not listen on port {self.port}: it is in use")
        return self._probe()

    @property
    def pid(self) -> int | None:
        """The server's pid, or None when it is not running."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def is_running(self) -> bool:
        return self.pid is not None

    def stop(self) -> bool:
        """Clean shutdown (SIGTERM), SIGKILL after `stop_timeout` seconds. False when it had to
        be killed."""
        return self._terminate(signal.SIGTERM, self.stop_timeout)

    def _terminate(self, sig: int, timeout: float) -> bool:
        self._before_stop()
        pid = self.pid
        if pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        proc = self._proc
        if proc is None:
            return True
        try:
            proc.wait(timeout)
            return True
        except subprocess.TimeoutExpired:
            self.kill()
            return False

    def restart(self) -> None:
        self.stop()
        self.start()

    def kill(self) -> None:
        """SIGKILL the server and its children (a crash) and wait until they are gone."""
        self._before_stop()
        pid = self.pid
        if pid:
            kill_tree(pid)
        proc = self._proc
        if proc is not None:
            if proc.poll() is None:
                kill_tree(proc.pid)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(10)

    def destroy(self) -> None:
        """Stop at once and delete the server directory (tests never need its data afterwards)."""
        unregister(self)
        with contextlib.suppress(Exception):
            self._halt()
        with contextlib.suppress(Exception):
            self.kill()
        remove_dir(self.base_dir)

    def __enter__(self: S) -> S:
        return self

    def __exit__(self, *exc: object) -> None:
        self.destroy()


def launch(server: S) -> S:
    """Set `server` up (init, start, provision), registered so it is destroyed at interpreter
    exit at the latest; destroyed at once if a step fails. The caller must `destroy()` it."""
    register(server)
    try:
        server.setup()
    except BaseException:
        server.destroy()
        raise
    return server
