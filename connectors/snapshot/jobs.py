"""Spark jobs the connector starts itself (a blocking snapshot, the incremental chunk job): the
job runs as `python -m <module>` with its request in a file only this user reads (it holds the
configuration, passwords included; removed after), the file its error message goes to, and the
connector's pid (the job ends when the connector is gone)."""

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


class ChildJob:
    """One job process at a time; `stop` ends the running one."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None

    def run(self, module: str, flag: str, request: Any, log_level: str) -> tuple[int, str | None]:
        """Run `module` with `flag FILE` (the request as JSON) until it exits: (exit code, the
        error message it left)."""
        with tempfile.TemporaryDirectory(prefix="tidemark-job-") as tmp:
            spec = Path(tmp) / "request.json"
            fd = os.open(spec, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(orjson.dumps(request))
            errors = Path(tmp) / "error.txt"
            cmd = [
                sys.executable,
                "-m",
                module,
                flag,
                str(spec),
                "--error-file",
                str(errors),
                "--parent",
                str(os.getpid()),
                "--log-level",
                log_level if log_level in LEVELS else "INFO",
            ]
            self.proc = subprocess.Popen(cmd)
            try:
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
