"""The maintenance DAG's work: Delta compaction, vacuum and checkpoints of the change log and the
state tables, and the source's log retention against the stored position.

Retention checks fail *before* the stored position is lost, with what to do:
- PostgreSQL: the slot is missing (while offsets are stored), its WAL is `lost` or `unreserved`
  (past `max_slot_wal_keep_size`), or the WAL it retains has used `RETENTION_FRACTION` of what
  the server will keep (`safe_wal_size`); an inactive slot is reported with the WAL it holds.
- MySQL/MariaDB: the stored binlog file is no longer on the server (purged), or it is the oldest
  one left, no longer written (only rotated files expire), and the stored position's events are
  older than `RETENTION_FRACTION` of the server's binlog expiry.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from connectors.settings.config import ConnectorConfig

log = logging.getLogger(__name__)

STATE_TABLES = ("offsets", "schema_history", "signals", "signal_log", "notifications", "snapshots", "status")
RETENTION_FRACTION = 0.8
STATUS_KEEP = timedelta(days=7)


class RetentionError(Exception):
    """The source is about to lose (or has lost) the position the connector resumes from."""


def changelog_uri(cfg: ConnectorConfig) -> str | None:
    if "delta" not in cfg.sink_types:
        return None
    return cfg.sink.delta.table_path or f"{str(cfg.warehouse).rstrip('/')}/{cfg.topic_prefix}/changelog"


def delta_tables(cfg: ConnectorConfig) -> list[tuple[str, str]]:
    """(label, uri) of the change log and the state tables of the warehouse."""
    out = []
    cl = changelog_uri(cfg)
    if cl is not None:
        out.append(("changelog", cl))
    out += [(f"_state/{t}", f"{str(cfg.warehouse).rstrip('/')}/_state/{t}") for t in STATE_TABLES]
    return out


def compact_and_vacuum(cfg: ConnectorConfig, retention_hours: int = 168) -> dict[str, Any]:
    """OPTIMIZE (compact small files), VACUUM (files unreferenced for `retention_hours`) and a
    checkpoint of every table that exists; old status rows of the connector are deleted first."""
    from deltalake import DeltaTable

    storage = {k: v.get_secret_value() for k, v in cfg.sink.delta.storage.items()} or None
    report: dict[str, Any] = {}
    for label, uri in delta_tables(cfg):
        opts = storage if label == "changelog" else None
        if not DeltaTable.is_deltatable(uri, storage_options=opts):
            continue
        dt = DeltaTable(uri, storage_options=opts)
        entry: dict[str, Any] = {"version_before": dt.version()}
        if label == "_state/status":
            cutoff = (datetime.now(UTC) - STATUS_KEEP).strftime("%Y-%m-%d %H:%M:%S")
            name = cfg.name.replace("'", "''")
            entry["pruned"] = dt.delete(f"connector = '{name}' AND at < '{cutoff}'").get(
                "num_deleted_rows", 0
            )
        metrics = dt.optimize.compact()
        entry["files_added"] = metrics.get("numFilesAdded", 0)
        entry["files_removed"] = metrics.get("numFilesRemoved", 0)
        # `retention_hours` is the DAG's explicit choice (default 168, Delta's own minimum): a
        # shorter one is honoured rather than refused by deltalake's check (see the Param's help).
        entry["vacuumed"] = len(
            dt.vacuum(retention_hours=retention_hours, dry_run=False, enforce_retention_duration=False)
        )
        dt.create_checkpoint()
        entry["version_after"] = dt.version()
        report[label] = entry
        log.info("%s (%s): %s", label, uri, entry)
    return report


def stored_offset(cfg: ConnectorConfig) -> dict[str, Any] | None:
    from connectors.engine.wiring import resume_point

    return resume_point(cfg)[1]


def check_postgres_slot(cfg: ConnectorConfig) -> dict[str, Any]:
    from connectors.settings.model import PostgresSettings
    from connectors.sources.postgres.connection import PgConnParams, connect

    assert isinstance(cfg.source, PostgresSettings)
    slot = cfg.source.slot_name
    conn = connect(PgConnParams.from_settings(cfg.source))
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT active, wal_status, safe_wal_size,"
                " pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint"
                " FROM pg_replication_slots WHERE slot_name = %s",
                (slot,),
            )
            row = cur.fetchone()
    finally:
        conn.close()
    if row is None:
        if stored_offset(cfg) is not None:
            raise RetentionError(
                f"connector {cfg.name}: replication slot {slot!r} does not exist although offsets are stored: "
                "the changes since the stored position are lost; run `tidemark offsets reset` "
                "(with snapshot.mode=initial a new snapshot follows) or use snapshot.mode=when_needed"
            )
        return {"slot": slot, "exists": False}
    active, wal_status, safe, retained = row
    out = {
        "slot": slot,
        "active": active,
        "wal_status": wal_status,
        "retained_bytes": retained,
        "safe_wal_size": safe,
    }
    if wal_status == "lost":
        raise RetentionError(
            f"connector {cfg.name}: slot {slot!r} has lost WAL it needs (wal_status=lost): the stored "
            "position cannot be resumed; reset the offsets and snapshot again"
        )
    if wal_status == "unreserved":
        raise RetentionError(
            f"connector {cfg.name}: slot {slot!r} retains {retained} bytes of WAL, beyond max_slot_wal_keep_size "
            "(wal_status=unreserved): the next checkpoint removes WAL the connector still needs; start the "
            "stream DAG now or raise max_slot_wal_keep_size"
        )
    if safe is not None and retained is not None and retained >= RETENTION_FRACTION * (retained + safe):
        raise RetentionError(
            f"connector {cfg.name}: slot {slot!r} retains {retained} bytes of WAL, {safe} bytes before "
            "max_slot_wal_keep_size removes WAL it needs; start the stream DAG now"
        )
    if not active:
        log.warning("slot %s is inactive (no connector reading it) and holds %s bytes of WAL", slot, retained)
    return out


def check_mysql_binlog(cfg: ConnectorConfig) -> dict[str, Any]:
    from connectors.settings.model import MySqlSettings
    from connectors.sources.mysql.setup import connect, connection_settings

    assert isinstance(cfg.source, MySqlSettings)
    offset = stored_offset(cfg)
    conn = connect(connection_settings(cfg.source))
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW BINARY LOGS")
            files = [r[0] for r in cur.fetchall()]
            expiry_s = None
            for var, scale in (("binlog_expire_logs_seconds", 1), ("expire_logs_days", 86400)):
                cur.execute("SHOW VARIABLES LIKE %s", (var,))
                got = cur.fetchone()
                if got and got[1] not in (None, "", "0", "0.000000"):
                    expiry_s = float(got[1]) * scale
                    break
    finally:
        conn.close()
    out: dict[str, Any] = {"binlogs": len(files), "oldest": files[0] if files else None, "expiry_s": expiry_s}
    if offset is None or not offset.get("file"):
        return out | {"stored": None}
    stored = offset["file"]
    out["stored"] = stored
    if stored not in files:
        raise RetentionError(
            f"connector {cfg.name}: the stored binlog file {stored} is no longer on the server (oldest: "
            f"{files[0] if files else 'none'}): the changes since the stored position are lost; "
            "run `tidemark offsets reset` and snapshot the tables again"
        )
    ts = offset.get("ts_sec")
    # Only a file the server has rotated away from can expire: the one being written (the newest)
    # is never purged, however old the stored position in it is (a quiet database).
    if expiry_s and ts and stored == files[0] and stored != files[-1]:
        age = time.time() - float(ts)
        out["age_s"] = age
        if age >= RETENTION_FRACTION * expiry_s:
            raise RetentionError(
                f"connector {cfg.name}: the stored position ({stored}) is {_duration(age)} old and its file "
                f"is the oldest binlog; the server purges binlogs after {_duration(expiry_s)}: start the "
                "stream DAG now or raise binlog_expire_logs_seconds"
            )
    return out


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def check_retention(cfg: ConnectorConfig) -> dict[str, Any]:
    return check_postgres_slot(cfg) if cfg.connector == "postgres" else check_mysql_binlog(cfg)
