"""A running connector must neither hold up nor write into the PostgreSQL server it reads:
a fast shutdown finishes at once (idle or right after changes) and the connector reconnects
after the restart; starting it writes nothing another logical slot would see (issue 8 #1, #7)."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pytest
from cdc import payload, popen_cli, read_jsonl, run_cli
from harness import wait_until
from pgcdc import write_config


def _created_ids(out: Path) -> list[int]:
    return [
        payload(r)["after"]["id"]
        for r in read_jsonl(out)
        if r["topic"] == "tm.public.t" and r["value"] is not None and payload(r)["op"] == "c"
    ]


def _insert(server: Any, ids: range) -> None:
    for i in ids:  # one transaction each
        server.execute("INSERT INTO t VALUES (%s, 'v')", (i,))


@pytest.mark.parametrize("state", ["idle", "after_changes"])
def test_fast_shutdown_is_not_held_up_and_streaming_resumes(
    pg_factory: Any, tmp_path: Path, state: str
) -> None:
    server = pg_factory()
    server.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
    out = tmp_path / "events.jsonl"
    cfg = write_config(
        tmp_path / "c.properties", server, slot="fast_stop", jsonl=out, **{"status.update.interval.ms": 1000}
    )
    log = tmp_path / "run.log"
    proc = popen_cli("run", "--config", str(cfg), log=log)
    try:
        # Settled: the connector has answered the walsender for over a second (a stop at the very
        # first moment, before anything was read, says nothing).
        wait_until(
            lambda: (
                server.scalar(
                    "SELECT count(*) FROM pg_stat_replication "
                    "WHERE reply_time > backend_start + interval '1.5 s'"
                )
                == 1
            ),
            timeout=60,
            what="connector streaming",
        )
        first = range(0)
        if state == "after_changes":
            first = range(50)
            _insert(server, first)
            wait_until(lambda: len(_created_ids(out)) >= len(first), timeout=60, what="the changes delivered")
        t0 = time.monotonic()
        stopped = server.stop("fast", timeout=20)
        took = time.monotonic() - t0
        assert stopped, (
            f"pg_ctl -m fast stop did not finish in 20 s with the connector attached\n{log.read_text()}"
        )
        assert took < 5, f"fast shutdown took {took:.1f} s"
        assert proc.poll() is None, log.read_text()[-3000:]

        server.start()
        second = range(len(first), len(first) + 50)
        _insert(server, second)
        wait_until(
            lambda: len(_created_ids(out)) >= len(first) + len(second),
            timeout=90,
            what="changes after the restart",
        )
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert _created_ids(out) == list(range(len(first) + len(second)))  # nothing lost, nothing twice
    text = log.read_text()
    assert "retrying" in text and "Traceback" not in text, text[-3000:]
    # The slot followed the server's position before the stop: that is no gap to warn about.
    assert "older than slot" not in text, text[-3000:]


def test_start_writes_nothing_another_slot_sees(pg_factory: Any, tmp_path: Path) -> None:
    server = pg_factory()
    server.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
    server.execute("CREATE PUBLICATION watch_pub FOR ALL TABLES")
    server.execute("SELECT pg_create_logical_replication_slot('watch', 'pgoutput')")
    out = tmp_path / "events.jsonl"
    cfg = write_config(tmp_path / "c.properties", server, slot="tm_slot", jsonl=out)
    for _ in range(2):  # first start (creates slot and publication) and a resume
        run_cli("run", "--config", str(cfg), "--until-caught-up", timeout=120)
    # The pgoutput message kinds the other slot would receive, in order ('M' = logical message).
    peek = (
        "SELECT coalesce(string_agg(chr(get_byte(data, 0)), ''), '') FROM "
        "pg_logical_slot_peek_binary_changes('watch', NULL, NULL, "
        "'proto_version', '1', 'publication_names', 'watch_pub', 'messages', 'true')"
    )
    assert server.scalar(peek) == ""  # no logical message, no transaction
    # The connector did stream: a change made now reaches both.
    _insert(server, range(1))
    run_cli("run", "--config", str(cfg), "--until-caught-up", timeout=120)
    assert _created_ids(out) == [0]
    assert server.scalar(peek) == "BRIC"  # Begin, Relation, Insert, Commit
