"""The snapshot job's progress display: on a terminal, a bar with tables done/total, rows and rows/s
on stderr (stdout untouched); without one, log lines only."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import time
from pathlib import Path
from typing import Any

import cdc
from mycdc import write_config


def _run_with_tty_stderr(args: list[str], timeout: float = 240) -> tuple[int, str, bytes]:
    """Run with stderr on a pseudo-terminal (stdout a pipe): (exit code, terminal text, stdout)."""
    master, slave = pty.openpty()
    env = dict(os.environ, PYTHONPATH=str(cdc.ROOT))
    proc = subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL, env=env, cwd=cdc.ROOT
    )
    os.close(slave)
    seen = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the terminal closed: the process ended
                    break
                if not chunk:
                    break
                seen += chunk
            elif proc.poll() is not None:
                break
        out = proc.stdout.read() if proc.stdout else b""
        code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    return code, re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", seen.decode(errors="replace")), out


def test_terminal_progress_bar(mariadb: Any, mariadb_database: str, tmp_path: Path) -> None:
    db = mariadb_database
    for t in ("a", "b"):
        mariadb.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, v text)", database=db)
        mariadb.execute(f"INSERT INTO {t} SELECT seq, 'x' FROM seq_1_to_3000", database=db)
    cfg = write_config(
        tmp_path / "c.properties",
        mariadb,
        server_id=7421,
        db=db,
        sinks="jsonl",
        jsonl=tmp_path / "out.jsonl",
        snapshot__mode="initial_only",
        tidemark__snapshot__chunk__rows=1000,
    )
    code, text, out = _run_with_tty_stderr([*cdc.TIDEMARK, "snapshot", "--config", str(cfg)])
    assert code == 0, text[-3000:]
    assert "snapshot" in text and "2/2 tables" in text and "6,000 rows" in text and "rows/s" in text, text[
        -3000:
    ]
    assert b"tables" not in out  # the bar is on stderr only
