"""The `tidemark` command line as a user runs it: error reporting and exit codes, bounded runs,
signals, metrics, stdout output and the demo (subprocesses against real private servers)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import orjson
import pytest
from cdc import ROOT, TIDEMARK, payload, popen_cli, read_jsonl, run_cli
from harness import wait_until
from pgcdc import write_config

from connectors.app.embedded.util import free_port

PG_KEYS = """\
debezium.source.connector.class=postgres
debezium.source.database.hostname=127.0.0.1
debezium.source.database.user=cdc
debezium.source.database.dbname=shop
debezium.source.topic.prefix=tm
debezium.source.snapshot.mode=no_data
"""


def cli(*args: str, timeout: float = 120, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*TIDEMARK, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
    )


def assert_one_error(proc: subprocess.CompletedProcess[str], code: int, *needles: str) -> None:
    """Exit `code`, one `tidemark: error:` line plus its hint on stderr, no traceback."""
    assert proc.returncode == code, proc.stderr
    err = proc.stderr
    assert "Traceback" not in err and "pthread" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines[0].startswith("tidemark: error: "), err
    assert lines[-1].startswith("  hint: "), err
    for needle in needles:
        assert needle in err, err


# --------------------------------------------------------------------------- errors and exit codes
def test_missing_or_unreadable_config_exits_2(tmp_path: Path) -> None:
    for args in (("run",), ("offsets", "show"), ("offsets", "reset", "--yes")):
        proc = cli(*args, "--config", str(tmp_path / "nope.properties"))
        assert_one_error(proc, 2, f"cannot read configuration file {tmp_path / 'nope.properties'}")
    assert_one_error(cli("run", "--config", str(tmp_path)), 2, "Is a directory")


def test_unknown_log_level_is_a_usage_error(tmp_path: Path) -> None:
    cfg = tmp_path / "c.properties"
    cfg.write_text(PG_KEYS + "debezium.sink.type=delta\n")
    for args in (("run",), ("offsets", "show"), ("offsets", "reset", "--yes")):
        proc = cli(*args, "--config", str(cfg), "--log-level", "LOUD")
        assert proc.returncode == 2 and "Invalid value for '--log-level'" in proc.stderr, proc.stderr
    proc = cli("offsets", "show", "--config", str(tmp_path / "none.properties"), "--log-level", "debug")
    assert proc.returncode == 2 and "cannot read configuration file" in proc.stderr, proc.stderr  # any case


def test_config_explain_shows_values_origins_and_descriptions(tmp_path: Path) -> None:
    cfg = tmp_path / "c.properties"
    cfg.write_text(
        PG_KEYS + "debezium.source.database.password=pw-s3cr3t\ndebezium.sink.type=delta\n"
        "debezium.sink.delta.storage.AWS_SECRET_ACCESS_KEY=k3y-s3cr3t\ndebezium.source.max.queue.size=9000\n"
    )
    proc = cli("config", "explain", "--config", str(cfg))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "pw-s3cr3t" not in out + proc.stderr and "k3y-s3cr3t" not in out + proc.stderr
    assert "debezium.source.database.password = ********  (file)" in out
    assert "debezium.source.slot.name = debezium  (default)" in out
    assert "debezium.source.decimal.handling.mode = precise  (default)" in out
    assert "    used — How DECIMAL" in out or "    used — " in out
    assert (
        "debezium.source.max.queue.size = 9000  (file)\n    ignored: Tidemark has no change-event queue"
        in out
    )
    assert "tidemark.commit.max.events = 4096  (default)" in out
    doc = orjson.loads(cli("config", "explain", "--config", str(cfg), "--json", "--all").stdout)
    rows = {r["key"]: r for r in doc["settings"]}
    assert rows["debezium.sink.delta.storage.AWS_SECRET_ACCESS_KEY"]["value"] == "********"
    assert rows["debezium.source.snapshot.isolation.mode"]["origin"] == "default"  # --all: the whole catalog
    assert all(r["description"] for r in doc["settings"])
    # a broken file is refused as by `run`
    assert_one_error(
        cli("config", "explain", "--config", str(tmp_path / "none")), 2, "cannot read configuration"
    )


def test_offsets_commands_report_storage_errors_in_one_line(tmp_path: Path) -> None:
    # A damaged offsets table: deltalake raises its own error (with a Rust backtrace when
    # RUST_BACKTRACE is set); the user gets one line and a hint, exit 1.
    log = tmp_path / "wh" / "_state" / "offsets" / "_delta_log"
    log.mkdir(parents=True)
    (log / "00000000000000000000.json").write_text("not json{\n")
    cfg = tmp_path / "c.properties"
    cfg.write_text(PG_KEYS + f"debezium.sink.type=delta\ntidemark.warehouse={tmp_path / 'wh'}\n")
    for args in (("offsets", "show"), ("offsets", "reset", "--yes")):
        proc = cli(*args, "--config", str(cfg), RUST_BACKTRACE="1")
        assert_one_error(proc, 1, "unexpected DeltaError: ", "--log-level DEBUG")
        assert len(proc.stderr.strip().splitlines()) == 2, proc.stderr


def test_config_error_found_after_load_exits_2(tmp_path: Path) -> None:
    # librdkafka refuses the producer setting when the sink is built, after config.load: still
    # invalid configuration, so exit 2 as for any other.
    cfg = tmp_path / "c.properties"
    cfg.write_text(
        PG_KEYS + "debezium.sink.type=kafka\n"
        "debezium.sink.kafka.producer.bootstrap.servers=127.0.0.1:1\n"
        "debezium.sink.kafka.producer.no.such.setting=1\n"
        f"tidemark.warehouse={tmp_path / 'wh'}\n"
    )
    assert_one_error(
        cli("run", "--config", str(cfg), "--max-seconds", "5"),
        2,
        'invalid Kafka producer setting: No such configuration property: "no.such.setting"',
    )


def test_invalid_config_lists_problems_exit_2(tmp_path: Path) -> None:
    cfg = tmp_path / "c.properties"
    cfg.write_text(
        PG_KEYS + "debezium.sink.type=jsonl\ndebezium.sink.jsonl.path=-\n"
        "debezium.source.skipped.operations=update\n"
    )
    proc = cli("run", "--config", str(cfg))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "skipped.operations=update: update is not one of c, u, d, t, r, none" in proc.stderr


# --------------------------------------------------------------------------- leaving the process
FINALIZE_PROBE = """
import sys
from connectors.app import cli

class Probe:
    def __del__(self):
        sys.stderr.write("interpreter finalization ran\\n")

cli.probe = Probe()  # module globals are cleared (and __del__ runs) only in Py_FinalizeEx
sys.argv = ["tidemark", *sys.argv[1:]]
cli.main()
"""


def test_cli_leaves_without_interpreter_finalization(tmp_path: Path) -> None:
    # pyarrow I/O threads of a Delta scan can still hold Python buffers when the command is
    # done; if they release them during interpreter finalization the process aborts (SIGABRT,
    # "terminate called without an active exception"). The CLI therefore ends with os._exit
    # after its atexit handlers: finalization never runs, output is flushed, the code is kept.
    cfg = tmp_path / "c.properties"
    cfg.write_text(PG_KEYS + f"debezium.sink.type=delta\ntidemark.warehouse={tmp_path / 'wh'}\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    ok = subprocess.run(
        [TIDEMARK[0], "-c", FINALIZE_PROBE, "offsets", "show", "--config", str(cfg)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=env,
    )
    assert ok.returncode == 0, ok.stderr
    assert '"connector": "tm"' in ok.stdout  # stdout flushed before leaving
    assert "interpreter finalization ran" not in ok.stderr
    bad = subprocess.run(
        [TIDEMARK[0], "-c", FINALIZE_PROBE, "run", "--config", str(tmp_path / "nope")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=env,
    )
    assert bad.returncode == 2 and "interpreter finalization ran" not in bad.stderr


# --------------------------------------------------------------------------- running against PostgreSQL
@pytest.fixture
def db(pg: Any, pg_database: str) -> Any:
    conn = pg.connect(dbname=pg_database)
    conn.cursor().execute("CREATE TABLE items (id int PRIMARY KEY, v text)")
    yield conn
    conn.close()


def _ops(records: list[dict[str, Any]]) -> list[str | None]:
    return [(payload(r) or {}).get("op") for r in records if r["value"] is not None]


def _scrape(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    return {m.group(1): float(m.group(2)) for m in re.finditer(r"(?m)^(tidemark_\S+) (\S+)$", text)}


def test_metrics_endpoint_while_running(
    pg: Any, pg_database: str, db: Any, tmp_path: Path, unique_name: Any
) -> None:
    slot = unique_name("slot")
    cur = db.cursor()
    cur.execute("CREATE TABLE skipped (id int PRIMARY KEY)")
    # All tables published, one captured: the other table's rows are counted as filtered.
    cfg = write_config(
        tmp_path / "c.properties",
        pg,
        slot=slot,
        dbname=pg_database,
        jsonl=tmp_path / "o.jsonl",
        **{"table.include.list": "public.items", "publication.autocreate.mode": "all_tables"},
    )
    run_cli("run", "--config", str(cfg), "--until-caught-up")  # slot and publication
    cur.execute("INSERT INTO skipped VALUES (1), (2)")
    cur.execute("INSERT INTO items VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    cur.execute("UPDATE items SET v = 'x' WHERE id < 3")
    cur.execute("DELETE FROM items WHERE id = 3")
    port = free_port()
    proc = popen_cli(
        "run",
        "--config",
        str(cfg),
        "--max-seconds",
        "120",  # only a bound: the test stops it once the metrics are checked
        "--metrics-port",
        str(port),
        log=tmp_path / "run.log",
    )
    try:
        want = {
            'tidemark_events_by_op_total{op="c"}': 3,
            'tidemark_events_by_op_total{op="u"}': 2,
            'tidemark_events_by_op_total{op="d"}': 1,
            "tidemark_total_number_of_events_seen_total": 6,
        }
        got = wait_until(
            lambda: (m := _scrape(port)) and all(m.get(k) == v for k, v in want.items()) and m,
            timeout=20,
            what="the metrics to count 3 creates, 2 updates and 1 delete",
            on_timeout=lambda: str(_scrape(port)),
        )
        assert got['tidemark_events_by_op_total{op="t"}'] == 0
        assert got["tidemark_number_of_events_filtered_total"] == 2
        assert got["tidemark_connected"] == 1 and got["tidemark_batches_total"] >= 1
        assert got["tidemark_number_of_committed_transactions_total"] >= 0
        proc.send_signal(signal.SIGTERM)  # as a supervisor stops it (--max-seconds: tests above)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert _ops(read_jsonl(tmp_path / "o.jsonl")) == ["c", "c", "c", "u", "u", "d"]


def test_sigint_stops_cleanly_and_resumes(
    pg: Any, pg_database: str, db: Any, tmp_path: Path, unique_name: Any
) -> None:
    slot = unique_name("slot")
    out, log = tmp_path / "o.jsonl", tmp_path / "run.log"
    cfg = write_config(
        tmp_path / "c.properties", pg, slot=slot, dbname=pg_database, jsonl=out, sinks="jsonl,delta"
    )
    run_cli("run", "--config", str(cfg), "--until-caught-up")
    proc = popen_cli("run", "--config", str(cfg), log=log)
    try:
        for i in range(20):
            db.cursor().execute("INSERT INTO items VALUES (%s, 'v')", (i,))
        wait_until(lambda: len(read_jsonl(out)) >= 20, timeout=60, what="20 events streamed")
        proc.send_signal(signal.SIGINT)  # Ctrl-C: the same clean stop as SIGTERM
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    text = log.read_text()
    assert "received SIGINT: finishing the current batch and stopping" in text
    assert "Traceback" not in text and "KeyboardInterrupt" not in text and "Aborted" not in text
    for i in range(20, 25):
        db.cursor().execute("INSERT INTO items VALUES (%s, 'v')", (i,))
    run_cli("run", "--config", str(cfg), "--until-caught-up")
    assert [payload(r)["after"]["id"] for r in read_jsonl(out)] == list(range(25))  # nothing lost or repeated


def test_jsonl_to_stdout_is_pure_json_lines(
    pg: Any, pg_database: str, db: Any, tmp_path: Path, unique_name: Any
) -> None:
    slot = unique_name("slot")
    cfg = write_config(
        tmp_path / "c.properties",
        pg,
        slot=slot,
        dbname=pg_database,
        prefix=slot,
        **{"debezium.sink.jsonl.path": "-"},
    )
    first = run_cli("run", "--config", str(cfg), "--until-caught-up", "--log-level", "DEBUG")
    assert first.stdout == ""
    cur = db.cursor()
    cur.execute("INSERT INTO items VALUES (1, 'a'), (2, 'b')")
    cur.execute("UPDATE items SET v = 'z' WHERE id = 2")
    cur.execute("DELETE FROM items WHERE id = 1")
    proc = run_cli("run", "--config", str(cfg), "--until-caught-up", "--log-level", "DEBUG")
    lines = proc.stdout.splitlines()
    records = [orjson.loads(line) for line in lines]  # every stdout line is one JSON record
    assert all(set(r) == {"topic", "key", "value"} for r in records)
    assert {r["topic"] for r in records} == {f"{slot}.public.items"}
    assert [(payload(r) or {}).get("op") if r["value"] is not None else None for r in records] == [
        "c",
        "c",
        "u",
        "d",
        None,
    ]
    assert "INFO    tidemark: stopped: 5 records" in proc.stderr  # the logs: on stderr only


# --------------------------------------------------------------------------- the embedded demo
_ROW = re.compile(r"^[│|] ((?:public|shop)\.\w+)\s+[│|] (\w+)\s+[│|] (\d+)\s+[│|]$", re.MULTILINE)
_META_ROW = re.compile(r"^[│|] topic (\w+)\s+[│|] ([\w ]+?)\s+[│|] (\d+)\s+[│|]$", re.MULTILINE)


def test_demo_is_bounded_and_reports_counts(tmp_path: Path) -> None:
    """The README's first command: both private servers, the workload, what landed; twice in
    the same directory (a second run starts afresh)."""
    workdir = tmp_path / "demo"
    for _ in range(2):
        proc = cli("demo", "--workdir", str(workdir), "--rows", "40", timeout=300, COLUMNS="250")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        rows = _ROW.findall(proc.stdout)
        for source, schema in (("postgres", "public"), ("mariadb", "shop")):
            counts = {(t, op): int(n) for t, op, n in rows if t.startswith(schema + ".")}
            tables = [f"{schema}.customers", f"{schema}.orders", f"{schema}.products"]
            assert {t for t, _ in counts} == set(tables), proc.stdout
            assert counts[(tables[2], "c")] == 3 and counts[(tables[0], "c")] == 5
            assert counts[(tables[1], "c")] > 0 and counts[(tables[1], "u")] > 0
            # rows there before the connector: its initial snapshot
            assert counts[(tables[2], "r")] == 3 and counts[(tables[0], "r")] == 5
            assert counts[(tables[1], "r")] > 0 and proc.stdout.count("initial snapshot:") == 2
            everything = read_jsonl(workdir / f"{source}.jsonl")
            # MariaDB's snapshot also emits its schema (include.schema.changes, on by default) on
            # the <topic.prefix> topic as Debezium's does: SET, a DROP TABLE per table, DROP/CREATE
            # DATABASE, USE, a CREATE TABLE per table
            ddl = [r for r in everything if r["topic"] == f"shop_{source}"]
            assert len(ddl) == (10 if source == "mariadb" else 0)
            # ... and the Delta table's count names them so, not as tombstones of no table
            meta = _META_ROW.findall(proc.stdout)
            assert ("shop_mariadb", "schema change", "10") in meta and len(meta) == 1, proc.stdout
            jsonl = [r for r in everything if r["topic"] != f"shop_{source}"]
            # the table counts every record of the Delta change log, tombstones included: as many
            # as the jsonl sink wrote, and the ops agree
            assert sum(counts.values()) == len(jsonl)
            assert counts.get((tables[1], "tombstone"), 0) == sum(1 for r in jsonl if r["value"] is None)
            assert {r["topic"] for r in jsonl} == {f"shop_{source}.{t}" for t in tables}
            assert f"{len(everything)} Kafka-format records in {workdir / f'{source}.jsonl'}" in proc.stdout
        # the live phase shows the workload arriving: everything lands while it streams, the
        # bounded run afterwards finds nothing left (once per source)
        live = re.findall(r"(\d+) records streamed live as the workload ran, (\d+) more", proc.stdout)
        assert len(live) == 2 and all(int(n) > 0 and more == "0" for n, more in live), proc.stdout
    assert not list((workdir / "servers").glob("*/data")), "the demo's servers were not removed"


def test_demo_refuses_an_unknown_source_before_starting(tmp_path: Path) -> None:
    proc = cli("demo", "--workdir", str(tmp_path / "d"), "--source", "oracle", timeout=60)
    assert proc.returncode == 1
    assert "unknown --source oracle" in proc.stderr and "choose from postgres, mariadb" in proc.stderr
    assert not (tmp_path / "d").exists()


def test_the_job_directory_of_a_killed_connector_is_removed_at_the_next_start(tmp_path: Path) -> None:
    """A connector killed together with its snapshot job (SIGKILL of the process group) leaves
    the job's temporary directory; the next start removes those of connectors that are gone and
    no other (a live one's, or any not named by a pid)."""
    from connectors.app.snapshot_job import reap_leftovers

    ended = subprocess.Popen(["true"])
    ended.wait()
    gone = tmp_path / f"tidemark-snapshot-{ended.pid}-k3x_1"
    gone.mkdir()
    (gone / "outcome.json").write_text("{}")
    live = tmp_path / f"tidemark-snapshot-{os.getpid()}-q9z_2"
    live.mkdir()
    unnamed = tmp_path / "tidemark-snapshot-ab_cd1"  # (the name before the pid was in it)
    unnamed.mkdir()
    assert reap_leftovers(tmp_path) == [gone]
    assert not gone.exists() and live.is_dir() and unnamed.is_dir()
