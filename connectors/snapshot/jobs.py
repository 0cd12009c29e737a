"""Spark jobs the connector starts itself (a blocking snapshot, the incremental chunk job): the
job runs as `python -m <module>` with its request on its stdin (it holds the configuration,
passwords included: never in a file, which a SIGKILL would leave behind), the file its error
message goes to, and the connector's pid (the job ends when the connector is gone)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import orjson

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
STDIN = "-"  # the request's "file" argument: read it from stdin


def read_request(arg: Path) -> Any:
    """In the job: the request its connector passed (`-`: on stdin), or one in a file."""
    data = sys.stdin.buffer.read() if str(arg) == STDIN else arg.read_bytes()
    return orjson.loads(data)


class ChildJob:
    """One job process at a time; `stop` ends the running one."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None

    def run(self, module: str, flag: str, request: Any, log_level: str) -> tuple[int, str | None]:
        """Run `module` with `flag -` (the request as JSON on its stdin) until it exits: (exit
        code, the error message it left)."""
        with tempfile.TemporaryDirectory(prefix="tidemark-job-") as tmp:
            errors = Path(tmp) / "error.txt"
            cmd = [
                sys.executable,
                "-m",
                module,
                flag,
                STDIN,
                "--error-file",
                str(errors),
                "--parent",
                str(os.getpid()),
                "--log-level",
                log_level if log_level in LEVELS else "INFO",
            ]
            self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE)
            try:
                assert self.proc.stdin is not None
                try:
                    with self.proc.stdin as feed:
                        feed.write(orjson.dumps(request))
                except BrokenPipeError:
                    pass  # it ended before reading: its exit code and error file say why
                code = self.proc.wait()
            finally:
                self.proc = None
            err = errors.read_text().strip() if errors.exists() else None
            return code, err or None

    def stop(self) -> None:
        proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.terminate()


def root_level() -> str:
    """The connector's log level, for the job's."""
    return str(logging.getLevelName(logging.getLogger().getEffectiveLevel()))
