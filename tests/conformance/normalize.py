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
