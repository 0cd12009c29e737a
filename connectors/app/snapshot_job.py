"""Start the snapshot Spark job (`spark_jobs/snapshot.py`) for `tidemark run` / `tidemark snapshot`.

In its own process: the Spark driver's JVM (and its memory) is gone before streaming starts, and
`connectors` never imports pyspark. The job's progress display and logs go to this process's
terminal; its outcome comes back as a small JSON file.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import orjson

from connectors.api import ConfigError, TerminalError
from connectors.settings.config import ConnectorConfig

log = logging.getLogger("tidemark")

NO_SNAPSHOT_MODES = ("no_data", "never")


def needs_job(cfg: ConnectorConfig) -> bool:
    """Whether a start of `cfg` asks the snapshot job (only it decides if data is read)."""
    return cfg.source.snapshot_mode not in NO_SNAPSHOT_MODES


_TMP_PREFIX = "tidemark-snapshot-"  # + the connector's pid + "-": whose directory it is


def reap_leftovers(root: Path | None = None) -> list[Path]:
    """Remove the job directories (under `root`, default the temp directory) of connectors that
    are gone: one killed together with its job (a SIGKILL of the process group) leaves its
    directory behind, as neither lives to remove it. Returns those removed."""
    removed = []
    for path in Path(root or tempfile.gettempdir()).glob(f"{_TMP_PREFIX}*-*"):
        pid = path.name[len(_TMP_PREFIX) :].partition("-")[0]
        if not pid.isdigit() or _alive(int(pid)):
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def run_job(config: Path, log_level: str) -> dict[str, Any]:
    """Run the job to its end; returns its outcome (`snapshot`, `stream`, `reason`, `rows`, ...).
    SIGTERM/SIGINT stop it (the next start resumes the snapshot) and raise."""
    reap_leftovers()
    with tempfile.TemporaryDirectory(prefix=f"{_TMP_PREFIX}{os.getpid()}-") as tmp:
        result = Path(tmp) / "outcome.json"
        cmd = [
            sys.executable,
            "-m",
            "spark_jobs.snapshot",
            "--config",
            str(config),
            "--result",
            str(result),
            "--parent",  # it ends (and removes `tmp`) if this process is killed
            str(os.getpid()),
            "--log-level",
            log_level if log_level in ("DEBUG", "INFO", "WARNING", "ERROR") else "ERROR",
        ]
        proc = subprocess.Popen(cmd)
        stopped: list[int] = []

        def forward(signum: int, _frame: Any) -> None:
            stopped.append(signum)
            proc.send_signal(signum)

        old = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            code = proc.wait()
        finally:
            for s, h in old.items():
                signal.signal(s, h)
        if stopped:
            raise TerminalError(
                "the snapshot was stopped before it finished",
                "start again: finished chunks are kept and the snapshot resumes with the rest",
            )
        if code != 0:
            # The job printed its error (message and hint) on stderr already.
            cls = ConfigError if code == 2 else TerminalError
            raise cls(f"the snapshot job failed (exit {code}); its error is above", None)
        return dict(orjson.loads(result.read_bytes()))
