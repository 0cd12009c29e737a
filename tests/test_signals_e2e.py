"""Signals end to end: `tidemark run` on the private PostgreSQL and MariaDB with every channel
enabled (source table, Delta table, file, Kafka on tansu). A `log` signal through each channel
is logged exactly once — also after a SIGKILL of the connector and after a clean restart — and
malformed signals through each channel give an error notification (Delta notifications table
and the log) while the stream's data events keep flowing."""

from __future__ import annotations

import signal as os_signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cdc
import mycdc
import orjson
import pgcdc
import pytest
from harness import wait_until

from connectors.settings.config import load
from connectors.signals.journal import PROCESSED
from connectors.signals.notify import read_notifications
from connectors.signals.tables import JOURNAL_SCHEMA, StateTable, send_delta_signal


@dataclass
class Setup:
    cfg: Path
    warehouse: Path
    jsonl: Path
    signal_file: Path
    topic: str
    sql: Callable[[str], Any]  # run one statement on the captured database
    table_prefix: str  # how the captured tables are named in SQL


def _processed(warehouse: Path, connector: str) -> list[dict[str, Any]]:
    rows = StateTable(warehouse, "signal_log", JOURNAL_SCHEMA).rows(connector)
    return [r for r in rows if r["status"] == PROCESSED]


def _log_count(log: Path, message: str) -> int:
    text = log.read_text(errors="replace") if log.exists() else ""
    return text.count(f"connectors.signals.actions.log: {message}\n")


def _orders(jsonl: Path) -> set[int]:
    return {
        cdc.payload(r)["after"]["id"]
        for r in cdc.read_jsonl(jsonl)
        if r.get("value") and r["topic"].endswith(".orders") and cdc.payload(r).get("after")
    }


def _send_all(s: Setup, kafka: Any, tag: str) -> None:
    """A `log` signal through each of the four channels (messages `<channel>-<tag>`)."""
    cfg = load(s.cfg)
    s.sql(
        f"INSERT INTO {s.table_prefix}debezium_signal (id, type, data) "
        f"VALUES ('src-{tag}', 'log', '{{\"message\": \"source-{tag}\"}}')"
    )
    send_delta_signal(s.warehouse, cfg.name, "log", {"message": f"delta-{tag}"})
    with s.signal_file.open("a") as f:
        f.write(
            orjson.dumps({"id": f"file-{tag}", "type": "log", "data": {"message": f"file-{tag}"}}).decode()
        )
        f.write("\n")
    value = {"id": f"kafka-{tag}", "type": "log", "data": {"message": f"kafka-{tag}"}}
    kafka.produce(s.topic, orjson.dumps(value), key=cfg.topic_prefix.encode())


def _send_malformed(s: Setup, kafka: Any) -> None:
    cfg = load(s.cfg)
    s.sql(
        f"INSERT INTO {s.table_prefix}debezium_signal (id, type, data) VALUES ('bad-src', 'log', '{{not json')"
    )
    send_delta_signal(s.warehouse, cfg.name, "no-such-type", {"x": 1})
    with s.signal_file.open("a") as f:
        f.write("this is not a signal\n")
    kafka.produce(s.topic, b"{oops", key=cfg.topic_prefix.encode())


def _insert_order(s: Setup, i: int) -> None:
    s.sql(f"INSERT INTO {s.table_prefix}orders (id, v) VALUES ({i}, 'v{i}')")


def _scenario(s: Setup, kafka: Any, tmp_path: Path) -> None:
    cfg = load(s.cfg)
    log = tmp_path / "connector.log"
    proc = cdc.popen_cli("run", "--config", str(s.cfg), log=log)
    warmup = iter(range(100, 10_000))

    def streaming() -> bool:
        # The slot / binlog position is taken when the connector starts: insert until one lands.
        _insert_order(s, next(warmup))
        return bool(_orders(s.jsonl))

    try:
        wait_until(streaming, 60, "the stream is running", interval=0.5)

        # 1. one log signal per channel, and one malformed signal per channel
        _send_all(s, kafka, "1")
        _send_malformed(s, kafka)
        _insert_order(s, 2)
        wait_until(lambda: len(_processed(s.warehouse, cfg.name)) >= 8, 60, "8 signals processed")
        wait_until(lambda: 2 in _orders(s.jsonl), 30, "data events after the signals")
        for ch in ("source", "delta", "file", "kafka"):
            assert _log_count(log, f"{ch}-1") == 1, ch
        errors = [n for n in read_notifications(s.warehouse, cfg.name) if n["aggregate_type"] == "Signal"]
        by_channel = {n["additional_data"]["channel"]: n["additional_data"] for n in errors}
        assert sorted(by_channel) == ["delta", "file", "kafka", "source"], errors
        assert by_channel["source"]["signal_id"] == "bad-src"
        assert "not valid JSON" in by_channel["source"]["message"]
        assert "unknown signal type 'no-such-type'" in by_channel["delta"]["message"]
        assert "this is not a signal" in by_channel["file"]["message"]
        assert "offset" in by_channel["kafka"]["message"]
        assert all(n["type"] == "ERROR" and n["additional_data"]["connector_name"] == "tm" for n in errors)
        text = log.read_text()
        assert "signal 'bad-src' (type 'log', source channel) not carried out" in text
        assert "[Notification Service] {aggregateType='Signal', type='ERROR'" in text
        assert s.signal_file.read_text() == ""  # the file channel empties the file once read

        # 2. SIGKILL; signals sent while the connector is down are taken after the restart
        cdc._sigkill(proc)
        _send_all(s, kafka, "2")
        _insert_order(s, 3)
        proc = cdc.popen_cli("run", "--config", str(s.cfg), log=log)
        wait_until(lambda: len(_processed(s.warehouse, cfg.name)) >= 12, 60, "12 signals processed")
        wait_until(lambda: 3 in _orders(s.jsonl), 30, "data events after the restart")

        # 3. a clean stop and start: nothing is taken twice
        proc.send_signal(os_signal.SIGTERM)
        assert proc.wait(60) == 0
        proc = cdc.popen_cli("run", "--config", str(s.cfg), log=log)
        send_delta_signal(s.warehouse, cfg.name, "log", {"message": "delta-3"})
        wait_until(lambda: _log_count(log, "delta-3") == 1, 60, "the signal after the clean restart")
    finally:
        if proc.poll() is None:
            proc.send_signal(os_signal.SIGTERM)
            proc.wait(60)
    processed = _processed(s.warehouse, cfg.name)
    assert len(processed) == 13 and len({r["key"] for r in processed}) == 13
    for tag in ("1", "2"):
        for ch in ("source", "delta", "file", "kafka"):
            assert _log_count(log, f"{ch}-{tag}") == 1, (ch, tag)
    assert len([n for n in read_notifications(s.warehouse, cfg.name) if n["aggregate_type"] == "Signal"]) == 4
    assert {2, 3} <= _orders(s.jsonl)


def _extra(tmp_path: Path, kafka: Any, topic: str, collection: str) -> dict[str, Any]:
    return {
        "signal.enabled.channels": "source,delta,file,kafka",
        "signal.data.collection": collection,
        "signal.file": str(tmp_path / "signals.txt"),
        "signal.kafka.topic": topic,
        "signal.kafka.bootstrap.servers": kafka.bootstrap,
        "signal.poll.interval.ms": "200",
        "notification.enabled.channels": "log,delta",
    }


@pytest.mark.timeout(240)
def test_signals_every_channel_postgres(
    pg: Any, pg_database: str, kafka: Any, unique_name: Any, tmp_path: Path
) -> None:
    def sql(stmt: str) -> None:
        pg.execute(stmt, dbname=pg_database)

    sql("CREATE TABLE debezium_signal (id varchar(64) PRIMARY KEY, type varchar(32) NOT NULL, data text)")
    sql("CREATE TABLE orders (id int PRIMARY KEY, v text)")
    topic = kafka.create_topic(unique_name("signals"))
    slot = unique_name("slot")
    extra = _extra(tmp_path, kafka, topic, "public.debezium_signal")
    cfgp = pgcdc.write_config(
        tmp_path / "pg.properties",
        pg,
        slot=slot,
        dbname=pg_database,
        jsonl=tmp_path / "out.jsonl",
        **{k.replace(".", "__"): v for k, v in extra.items()},
    )
    s = Setup(cfgp, tmp_path / "warehouse", tmp_path / "out.jsonl", tmp_path / "signals.txt", topic, sql, "")
    _scenario(s, kafka, tmp_path)


@pytest.mark.timeout(240)
def test_signals_every_channel_mariadb(
    mariadb: Any, mariadb_database: str, kafka: Any, unique_name: Any, tmp_path: Path
) -> None:
    db = mariadb_database

    def sql(stmt: str) -> None:
        mariadb.execute(stmt, database=db)

    sql("CREATE TABLE debezium_signal (id varchar(64) PRIMARY KEY, type varchar(32) NOT NULL, data text)")
    sql("CREATE TABLE orders (id int PRIMARY KEY, v text)")
    topic = kafka.create_topic(unique_name("signals"))
    extra = _extra(tmp_path, kafka, topic, f"{db}.debezium_signal")
    cfgp = mycdc.write_config(
        tmp_path / "my.properties",
        mariadb,
        server_id=unique_name.server_id(),
        db=db,
        jsonl=tmp_path / "out.jsonl",
        **{k.replace(".", "__"): v for k, v in extra.items()},
    )
    s = Setup(cfgp, tmp_path / "warehouse", tmp_path / "out.jsonl", tmp_path / "signals.txt", topic, sql, "")
    _scenario(s, kafka, tmp_path)


def test_a_table_the_user_may_not_read_is_named_not_uncaptured(
    pg: Any, pg_database: str, unique_name: Any, tmp_path: Path
) -> None:
    """`tidemark signal execute-snapshot` (and the running connector: the same catalog) names a
    captured table database.user may not SELECT (or whose schema it may not use), with the GRANT. information_schema hid it, so
    the signal was refused as matching "no captured table"."""
    role = unique_name("reader")
    for stmt in (
        "CREATE TABLE orders (id int PRIMARY KEY, v text)",
        "CREATE TABLE secrets (id int PRIMARY KEY, v text)",
        "CREATE SCHEMA priv",
        "CREATE TABLE priv.kept (id int PRIMARY KEY)",
        f"CREATE ROLE {role} LOGIN PASSWORD 'pw'",
        f"GRANT SELECT ON orders, priv.kept TO {role}",  # not USAGE on priv
    ):
        pg.execute(stmt, dbname=pg_database)
    try:
        cfgp = pgcdc.write_config(
            tmp_path / "pg.properties",
            pg,
            slot=unique_name("slot"),
            dbname=pg_database,
            database__user=role,
            database__password="pw",
            jsonl=tmp_path / "out.jsonl",
            signal__enabled__channels="delta",
        )
        p = cdc.run_cli(
            "signal", "--config", str(cfgp), "execute-snapshot", "--tables", "public.secrets", check=False
        )
        assert p.returncode == 2, p.stderr
        assert (
            f"database.user may not read public.secrets, so no snapshot of it: GRANT SELECT ON public.secrets TO {role}"
            in p.stderr
        ), p.stderr
        p = cdc.run_cli(
            "signal", "--config", str(cfgp), "execute-snapshot", "--tables", "priv.kept", check=False
        )
        assert (
            p.returncode == 2 and f"no snapshot of it: GRANT USAGE ON SCHEMA priv TO {role}\n" in p.stderr
        ), p.stderr
        ok = cdc.run_cli("signal", "--config", str(cfgp), "execute-snapshot", "--tables", "public.orders")
        assert ok.stdout.strip()
    finally:
        pg.execute(f"DROP OWNED BY {role}", dbname=pg_database)
        pg.execute(f"DROP ROLE {role}")
