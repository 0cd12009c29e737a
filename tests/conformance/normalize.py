"""Make Debezium and Tidemark records comparable, and compare them with a readable report.

Normalisation removes only what differs between two captures of the same changes:

* value payload ``ts_ms`` / ``ts_us`` / ``ts_ns`` (envelope processing time; message events too),
* ``source.ts_ms`` / ``source.ts_us`` / ``source.ts_ns`` and ``source.version``,
* ``ts_ms`` of transaction-topic (BEGIN/END) records,
* the value of the ``__debezium.context.runId`` header, new for every connector start: it must be
  a UUIDv7 on both sides and is then masked. Every other header — the other context headers
  (``extended.headers.enabled``), ``__debezium.oldkey`` / ``__debezium.newkey`` on a primary-key
  change — is compared exactly, in order; a record without headers has ``headers: []``.

One Debezium artefact is volatile too and is masked, not dropped: the END record of a transaction
that contains a transactional logical-decoding message lists the message as data collection
``io.debezium.connector.postgresql.LogicalDecodingMessageMonitor$LogicalDecodingMessageId@<hash>``
(a Java ``toString`` with an identity hash, placed in hash-map order). The hash is dropped (Tidemark
emits the class name alone) and such entries move to the end of ``data_collections``; every other
entry keeps its order.

Schemas are compared in full (field order, names, versions, parameters, defaults). Everything else
is compared exactly: topic, key, value, and the order of records within each topic.
"""

from __future__ import annotations

import copy
import difflib
import json
import re
from collections import OrderedDict
from typing import Any

VOLATILE_PAYLOAD = ("ts_ms", "ts_us", "ts_ns")
VOLATILE_SOURCE = ("ts_ms", "ts_us", "ts_ns", "version")
CONTEXT_HEADER = "__debezium.context."
_MSG_ID = re.compile(
    r"^(io\.debezium\.connector\.postgresql\.LogicalDecodingMessageMonitor\$LogicalDecodingMessageId)(?:@[0-9a-f]+)?$"
)


_UUID7 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


def _header(h: list | tuple) -> list:
    name, value = str(h[0]), copy.deepcopy(h[1])
    if name == CONTEXT_HEADER + "runId":
        run_id = value.get("payload") if isinstance(value, dict) else value
        value = "<a UUIDv7>" if _UUID7.match(str(run_id)) else f"<not a UUIDv7: {run_id!r}>"
    return [name, value]


def is_transaction_record(rec: dict) -> bool:
    v = rec.get("value")
    return (
        bool(v)
        and isinstance(v, dict)
        and (v.get("schema") or {}).get("name") == "io.debezium.connector.common.TransactionMetadataValue"
    )


def normalize_record(rec: dict) -> dict:
    """Return ``{"topic", "key", "value", "headers"}`` with the volatile fields removed (input unchanged)."""
    out = {
        "topic": rec.get("topic"),
        "key": copy.deepcopy(rec.get("key")),
        "value": copy.deepcopy(rec.get("value")),
        "headers": [_header(h) for h in rec.get("headers") or []],
    }
    value = out["value"]
    if not isinstance(value, dict):
        return out
    payload = value.get("payload") if "payload" in value else None
    if not isinstance(payload, dict):
        return out
    if is_transaction_record(out):
        payload.pop("ts_ms", None)
        colls = payload.get("data_collections")
        if isinstance(colls, list):
            plain, msgs = [], []
            for c in colls:
                name = c.get("data_collection") if isinstance(c, dict) else None
                m = _MSG_ID.match(name) if isinstance(name, str) else None
                if m:
                    c = dict(c, data_collection=m.group(1))
                    msgs.append(c)
                else:
                    plain.append(c)
            payload["data_collections"] = plain + msgs
        return out
    for k in VOLATILE_PAYLOAD:
        payload.pop(k, None)
    src = payload.get("source")
    if isinstance(src, dict):
        for k in VOLATILE_SOURCE:
            src.pop(k, None)
    return out


def normalize(records: list[dict]) -> list[dict]:
    return [normalize_record(r) for r in records]


def by_topic(records: list[dict]) -> OrderedDict[str, list[dict]]:
    """Records grouped by topic, topics in order of first appearance, record order kept."""
    groups: OrderedDict[str, list[dict]] = OrderedDict()
    for r in records:
        groups.setdefault(r.get("topic"), []).append(r)
    return groups


# --------------------------------------------------------------------------- comparison
def _paths(a: Any, b: Any, path: str, out: list[str], limit: int) -> None:
    if len(out) >= limit:
        return
    if isinstance(a, dict) and isinstance(b, dict):
        ka, kb = list(a), list(b)
        if ka != kb and set(ka) == set(kb):
            out.append(f"{path or '$'}: key order differs: expected {ka} got {kb}")
        for k in ka:
            if k not in b:
                out.append(f"{path}.{k}: missing (expected {_short(a[k])})")
            else:
                _paths(a[k], b[k], f"{path}.{k}", out, limit)
        for k in kb:
            if k not in a:
                out.append(f"{path}.{k}: unexpected {_short(b[k])}")
        return
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{path}: list length {len(a)} != {len(b)}")
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            # name list items by their "field" when they are schema fields
            tag = x.get("field") if isinstance(x, dict) and "field" in x else i
            _paths(x, y, f"{path}[{tag}]", out, limit)
        return
    if type(a) is not type(b) or a != b:
        out.append(f"{path}: expected {_short(a)} got {_short(b)}")


def _short(v: Any, n: int = 160) -> str:
    s = json.dumps(v, ensure_ascii=False)
    return s if len(s) <= n else s[: n - 3] + "..."


def _label(r: dict) -> str:
    v = r.get("value")
    p = v.get("payload") if isinstance(v, dict) else None
    op = (p or {}).get("op") or (p or {}).get("status") or ("tombstone" if v is None else "?")
    key = r.get("key")
    kp = key.get("payload") if isinstance(key, dict) and "payload" in key else key
    return f"op={op} key={_short(kp, 80)}"


def diff_records(
    expected: list[dict], actual: list[dict], *, max_records: int = 5, max_paths: int = 25
) -> list[str]:
    """Compare normalised record lists per topic; returns human-readable problems ([] = equal)."""
    problems: list[str] = []
    exp, act = by_topic(expected), by_topic(actual)
    missing = [t for t in exp if t not in act]
    extra = [t for t in act if t not in exp]
    if missing:
        problems.append(f"topics missing from Tidemark: {missing}")
    if extra:
        problems.append(f"topics only in Tidemark: {extra}")
    shown = 0
    for topic, erecs in exp.items():
        arecs = act.get(topic, [])
        if topic not in act:
            continue
        if len(erecs) != len(arecs):
            problems.append(
                f"[{topic}] {len(erecs)} records from Debezium, {len(arecs)} from Tidemark\n"
                f"    Debezium: {[_label(r) for r in erecs]}\n    Tidemark: {[_label(r) for r in arecs]}"
            )
        for i, (e, a) in enumerate(zip(erecs, arecs, strict=False)):
            if e == a:
                continue
            if shown >= max_records:
                problems.append(f"[{topic}] #{i}: differs (further details suppressed)")
                continue
            shown += 1
            paths: list[str] = []
            _paths(e, a, "", paths, max_paths)
            if not paths:  # equal values, different types/ordering not caught above
                paths = ["(differs in representation)"]
            udiff = difflib.unified_diff(
                json.dumps(e, indent=1, ensure_ascii=False).splitlines(),
                json.dumps(a, indent=1, ensure_ascii=False).splitlines(),
                "debezium",
                "tidemark",
                n=2,
                lineterm="",
            )
            ud = list(udiff)
            if len(ud) > 80:
                ud = ud[:80] + [f"... ({len(ud) - 80} more diff lines)"]
            problems.append(
                f"[{topic}] record #{i} ({_label(e)}) differs:\n    "
                + "\n    ".join(paths)
                + "\n"
                + "\n".join(ud)
            )
    return problems


def assert_conform(debezium: list[dict], tidemark: list[dict], **kw: Any) -> None:
    """Normalise both sides and raise AssertionError with a readable report on any difference."""
    problems = diff_records(normalize(debezium), normalize(tidemark), **kw)
    if problems:
        head = f"Tidemark output differs from Debezium 3.6 ({len(debezium)} vs {len(tidemark)} records):"
        raise AssertionError(head + "\n\n" + "\n\n".join(problems))


# --------------------------------------------------------------------------- snapshots
# What differs between two snapshots of the same rows, taken by two connectors one after the other
# (each with its own new slot and its own snapshot transaction):
#
# * ``source.lsn`` -- the snapshot's consistency point: the new slot's consistent point (or the
#   WAL position read in the snapshot transaction). Each connector creates its own slot, later in
#   the WAL than the other's, so the values differ; within one side every snapshot record carries
#   the same value, which `snapshot_problems` checks instead.
# * ``source.txId`` -- ``txid_current()`` of the snapshot transaction: a new transaction id for
#   every snapshot. Same check: one value per side.
# * ``source.sequence`` -- ``["<lsn_commit>", "<lsn>"]`` text: holds the lsn above (masked so).
# * ``source.snapshot`` -- which row gets ``first`` / ``first_in_data_collection`` /
#   ``last_in_data_collection`` / ``last`` depends on the order rows come out of the scan:
#   Debezium's ``SELECT * FROM t`` (no ORDER BY) returns heap order, a parallel reader returns
#   its chunks in any order. The mark is masked on each record and compared as a multiset per
#   topic instead (one ``first_in_data_collection`` and one ``last_in_data_collection`` per table
#   of two or more rows ...), plus: exactly one ``last``, on the final snapshot record.
# Records are then compared as a multiset per topic (sorted by their normalised JSON).
#
# MySQL/MariaDB (binlog connectors), in the same way:
# * ``source.file`` / ``source.pos`` -- the binlog position read under the snapshot's lock (the
#   view's consistency point): each connector takes its own view, so any write between the two
#   snapshots moves it (the conformance test writes none, so the two usually agree). One value
#   per side, checked by `snapshot_problems`.
# * ``source.gtid`` -- the view's GTID set when the server has GTIDs, else null: part of the same
#   consistency point (Debezium 3.6's MySQL connector leaves it null in snapshot records).
# * ``source.ts_ms`` / ``ts_us`` / ``ts_ns`` -- masked for every record above; in a MySQL snapshot
#   Debezium's data records carry the server's CURRENT_TIMESTAMP (whole seconds) read when each
#   table's export starts, its schema-change records the clock when each event was made.
# * Schema-change records (``<topic.prefix>`` topic, ``include.schema.changes``) carry the view's
#   position too (masked so), but their ``source.snapshot`` mark is compared exactly, and the
#   topic in order: the statements replay the schema, so their order is part of the contract.

SNAPSHOT_MARKS = ("first", "first_in_data_collection", "true", "last_in_data_collection", "last")
SNAPSHOT_VOLATILE_SOURCE = ("lsn", "txId", "sequence", "file", "pos", "gtid")
SCHEMA_CHANGE_VALUE = "SchemaChangeValue"  # io.debezium.connector.<mysql|mariadb>.SchemaChangeValue
MASKED_MARK = "<snapshot mark>"


def is_schema_change_record(rec: dict) -> bool:
    """Whether ``rec`` is a binlog connector's schema-change event (by its value schema's name,
    or, without schemas, by its payload's ``ddl`` and ``databaseName``)."""
    value = rec.get("value")
    if not isinstance(value, dict):
        return False
    name = (value.get("schema") or {}).get("name") if "schema" in value else None
    if isinstance(name, str):
        return name.endswith("." + SCHEMA_CHANGE_VALUE)
    return "ddl" in value and "databaseName" in value


def _payload(rec: dict) -> dict | None:
    value = rec.get("value")
    if not isinstance(value, dict):
        return None
    payload = value.get("payload") if "schema" in value and "payload" in value else value
    return payload if isinstance(payload, dict) else None


def snapshot_mark(rec: dict) -> str | None:
    """``source.snapshot`` of a change event when it is a snapshot mark, else None."""
    p = _payload(rec)
    src = p.get("source") if p else None
    mark = src.get("snapshot") if isinstance(src, dict) else None
    return mark if mark in SNAPSHOT_MARKS else None


def normalize_snapshot_record(rec: dict) -> dict:
    """`normalize_record`, and for a snapshot record the snapshot-volatile source fields masked."""
    out = normalize_record(rec)
    if snapshot_mark(rec) is None:
        return out
    src = _payload(out)["source"]  # type: ignore[index]
    for k in SNAPSHOT_VOLATILE_SOURCE:
        if k in src:
            src[k] = f"<{k}>"
    if not is_schema_change_record(rec):
        src["snapshot"] = MASKED_MARK
    return out


def _canonical(rec: dict) -> str:
    return json.dumps(rec, sort_keys=True, ensure_ascii=False)


def snapshot_problems(records: list[dict], side: str, *, ordered: bool = True) -> list[str]:
    """What one side's snapshot must satisfy whatever the other emitted: one consistency point
    (lsn, txId) on every snapshot record, exactly one ``last`` and it is the final snapshot record,
    at most one ``first`` and it is the first. ``ordered=False`` when ``records`` are not in
    emission order (a Delta change log: parallel chunks commit separately, each with its own
    `event_index` from 0): then only the counts are checked."""
    problems: list[str] = []
    every = [r for r in records if snapshot_mark(r) is not None]
    if not every:
        return [f"{side}: no snapshot records"]
    # the consistency point: PostgreSQL's (lsn, txId), the binlog's (file, pos, gtid); schema
    # change records of a MySQL snapshot carry it too
    points = {
        tuple(_payload(r)["source"].get(k) for k in ("lsn", "txId", "file", "pos", "gtid"))  # type: ignore[index]
        for r in every
    }
    if len(points) != 1:
        problems.append(
            f"{side}: snapshot records carry {len(points)} consistency points (lsn, txId, file, pos, "
            f"gtid): {sorted(map(str, points))[:5]}"
        )
    # the marks are the data records' (schema change records come before them, all "true")
    snaps = [r for r in every if not is_schema_change_record(r)]
    if not snaps:
        return [*problems, f"{side}: no snapshot data records"]
    marks = [snapshot_mark(r) for r in snaps]
    if marks.count("last") != 1 or (ordered and marks[-1] != "last"):
        problems.append(
            f"{side}: {marks.count('last')} records marked last; the final snapshot record is {marks[-1]!r}"
        )
    if marks.count("first") > 1 or (ordered and "first" in marks and marks[0] != "first"):
        problems.append(f"{side}: {marks.count('first')} records marked first; the first one is {marks[0]!r}")
    return problems


def mark_counts(records: list[dict]) -> dict[str, dict[str, int]]:
    """Per topic, how many snapshot records carry each mark."""
    counts: dict[str, dict[str, int]] = {}
    for r in records:
        mark = snapshot_mark(r)
        if mark is not None:
            per = counts.setdefault(str(r.get("topic")), {})
            per[mark] = per.get(mark, 0) + 1
    return counts


def diff_snapshot(
    debezium: list[dict], tidemark: list[dict], *, tidemark_ordered: bool = True, **kw: Any
) -> list[str]:
    """Problems (``[]`` = equal) between two snapshots of the same tables: per-side consistency,
    the marks per topic as a multiset, then the normalised records per topic as a multiset.
    ``tidemark_ordered``: whether Tidemark's records are in emission order (see
    `snapshot_problems`)."""
    problems = snapshot_problems(debezium, "Debezium") + snapshot_problems(
        tidemark, "Tidemark", ordered=tidemark_ordered
    )
    # schema change records' marks are compared record by record below, not counted here
    dm = mark_counts([r for r in debezium if not is_schema_change_record(r)])
    tm = mark_counts([r for r in tidemark if not is_schema_change_record(r)])
    for topic in sorted(set(dm) | set(tm)):
        if dm.get(topic) != tm.get(topic):
            problems.append(
                f"[{topic}] source.snapshot marks differ: Debezium {dm.get(topic)} Tidemark {tm.get(topic)}"
            )

    schema_topics = {r.get("topic") for r in debezium + tidemark if is_schema_change_record(r)}

    def ordered(records: list[dict]) -> list[dict]:
        norm = [normalize_snapshot_record(r) for r in records]
        groups = by_topic(norm)
        # the schema-change topic keeps its order (the DDL replays in it), data topics are sorted
        return [
            r
            for topic in groups
            for r in (groups[topic] if topic in schema_topics else sorted(groups[topic], key=_canonical))
        ]

    return problems + diff_records(ordered(debezium), ordered(tidemark), **kw)


def assert_snapshot_conform(debezium: list[dict], tidemark: list[dict], **kw: Any) -> None:
    """`diff_snapshot`, raising AssertionError with a readable report on any difference."""
    problems = diff_snapshot(debezium, tidemark, **kw)
    if problems:
        head = (
            f"Tidemark's snapshot differs from Debezium 3.6's ({len(debezium)} vs {len(tidemark)} records; "
            "compared per topic as multisets):"
        )
        raise AssertionError(head + "\n\n" + "\n\n".join(problems))
