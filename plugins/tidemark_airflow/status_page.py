"""The Tidemark status page: a FastAPI app the plugin mounts at `/tidemark` on Airflow's API server.

Every configured connector (the DAG factory's connector files) with its state, source position,
lag, events/s, last error (from `<warehouse>/_state/status`), its newest Spark snapshot job's
progress, initial or blocking (chunks done/total, rows, ETA, from `_state/snapshots`), the newest
incremental snapshot's progress (state, chunks, tables done, the key it is at; from its notifications),
recent notifications (`_state/notifications`) and an events/s + lag chart of the last hour. Actions write signals to
the Delta signal channel (`_state/signals`): start an incremental or blocking snapshot of chosen
tables, pause / resume / stop the running one. It reads Delta tables only, never task logs.

The API needs an Airflow login (the `_token` cookie the UI sets, or a bearer token).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from fastapi import APIRouter, Depends, FastAPI, HTTPException
from fastapi.responses import HTMLResponse
from pydantic import BaseModel, Field

from tidemark_airflow.config import ConnectorFile, discover

STALE_S = 30  # a `running` row older than this: the process is gone without a final row


def _auth() -> list[Any]:
    try:
        from airflow.api_fastapi.core_api.security import get_user
    except ImportError:  # pragma: no cover - the API server always has it
        return []
    return [Depends(get_user)]


app = FastAPI(title="Tidemark", description=__doc__)
api = APIRouter(prefix="/api", dependencies=_auth())


def _ts(v: Any) -> str | None:
    return v.isoformat() if isinstance(v, datetime) else None


def _status(cf: ConnectorFile) -> dict[str, Any]:
    from connectors.engine.status import read_status

    assert cf.cfg is not None
    rows = read_status(cf.cfg.warehouse, cf.cfg.name, datetime.now(UTC) - timedelta(hours=1))
    if not rows:
        rows = read_status(cf.cfg.warehouse, cf.cfg.name)[-1:]
    if not rows:
        return {"state": "never run", "history": []}
    last = rows[-1]
    state = last["state"]
    age = (datetime.now(UTC) - last["at"]).total_seconds()
    if state == "running" and age > STALE_S:
        state = f"unknown (no health for {age:.0f}s)"
    errors = [r for r in rows if r["error"]]
    return {
        "state": state,
        "at": _ts(last["at"]),
        "connected": last["connected"],
        "position": orjson.loads(last["position"]) if last["position"] else None,
        "lag_ms": last["lag_ms"],
        "events_per_s": last["events_per_s"],
        "events": last["events"],
        "last_event_at": _ts(last["last_event_at"]),
        "last_error": errors[-1]["error"] if errors else None,
        "history": [
            {"at": _ts(r["at"]), "events_per_s": r["events_per_s"], "lag_ms": r["lag_ms"]} for r in rows
        ],
    }


def _snapshot(cf: ConnectorFile) -> dict[str, Any] | None:
    """The newest Spark snapshot job's progress: the initial snapshot's or a blocking one's."""
    from connectors.snapshot.blocking import progress_key

    assert cf.cfg is not None
    found = [
        s
        for key, kind in ((cf.cfg.name, "initial"), (progress_key(cf.cfg.name), "blocking"))
        if (s := _progress(cf.cfg.warehouse, key, kind)) is not None
    ]
    return max(found, key=lambda s: str(s["started_at"])) if found else None


def _progress(warehouse: str, key: str, kind: str) -> dict[str, Any] | None:
    from deltalake import DeltaTable

    from connectors.snapshot.progress import SnapshotProgress

    progress = SnapshotProgress(warehouse, key)
    state = progress.latest()
    if state is None:
        return None
    t = DeltaTable(progress.table_uri).to_pyarrow_table(
        columns=["event", "at"],
        filters=[("connector", "=", key), ("snapshot_id", "=", state.snapshot_id)],
    )
    times = t.to_pylist()
    started = min(r["at"] for r in times)
    done, total = len(state.done), len(state.chunks)
    eta = None
    if 0 < done < total:
        elapsed = (datetime.now(UTC) - started).total_seconds()
        eta = elapsed / done * (total - done)
    return {
        "snapshot_id": state.snapshot_id,
        "kind": kind,
        "started_at": _ts(started),
        "chunks_total": total,
        "chunks_done": done,
        "rows": state.rows,
        "completed": state.completed,
        "eta_s": eta,
        "tables": sorted({c.table for c in state.chunks}),
    }


def _at(r: dict[str, Any]) -> str:
    return datetime.fromtimestamp(r["timestamp"] / 1000, UTC).isoformat()


def _notifications(rows: list[dict[str, Any]], n: int = 20) -> list[dict[str, Any]]:
    return [
        {
            "id": r["id"],
            "aggregate_type": r["aggregate_type"],
            "type": r["type"],
            "additional_data": r["additional_data"],
            "at": _at(r),
        }
        for r in reversed(rows[-n:])
    ]


SIGNALLED = ("Incremental Snapshot",)  # (a blocking snapshot's progress is the Spark job's)
ENDED = {"COMPLETED", "ABORTED"}
# The notifications that change a snapshot's phase; a chunk read while a pause took effect still
# reports IN_PROGRESS after PAUSED, and must not make a paused snapshot look running.
PHASES = {"STARTED", "PAUSED", "RESUMED", *ENDED}


def _signalled_snapshot(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The newest incremental snapshot, from its notifications (all under the
    signal's id): its state (the newest notification's type), tables, the table being read and
    the last / maximum key read, chunks read so far, rows of the tables done. A snapshot's size
    is not known in advance (it reads by key up to the maximum key of the table it is on)."""
    mine = [r for r in rows if r["aggregate_type"] in SIGNALLED]
    if not mine:
        return None
    sid = mine[-1]["id"]
    mine = [r for r in mine if r["id"] == sid]
    last = mine[-1]
    tables: list[str] = []
    current: dict[str, Any] = {}
    done: dict[str, int] = {}
    for r in mine:
        data = r["additional_data"]
        if data.get("data_collections"):
            tables = data["data_collections"].split(",")
        if r["type"] == "IN_PROGRESS":
            current = data
        elif r["type"] == "TABLE_SCAN_COMPLETED":
            done[data.get("scanned_collection", "")] = int(data.get("total_rows_scanned") or 0)
    phase = next((r["type"] for r in reversed(mine) if r["type"] in PHASES), last["type"])
    return {
        "id": sid,
        "kind": last["aggregate_type"].split()[0].lower(),
        "state": phase if phase == "PAUSED" else last["type"],
        "ended": last["type"] in ENDED,
        "tables": tables,
        "tables_done": sorted(done),
        "rows_done": sum(done.values()),
        "chunks": sum(1 for r in mine if r["type"] == "IN_PROGRESS"),
        "current_table": None if last["type"] in ENDED else current.get("current_collection_in_progress"),
        "last_key": current.get("last_processed_key"),
        "maximum_key": current.get("maximum_key"),
        "started_at": _at(mine[0]),
        "at": _at(last),
    }


def _summary(cf: ConnectorFile) -> dict[str, Any]:
    base: dict[str, Any] = {"name": cf.name, "file": str(cf.path)}
    if cf.cfg is None:
        return base | {"state": "invalid configuration", "last_error": cf.error}
    status = _status(cf)
    status.pop("history")
    return base | {"connector": cf.cfg.name, "class": cf.cfg.connector} | status


def _find(name: str) -> ConnectorFile:
    for cf in discover():
        if cf.name == name:
            if cf.cfg is None:
                raise HTTPException(409, cf.error)
            return cf
    raise HTTPException(404, f"no connector {name!r}")


@api.get("/connectors")
def connectors() -> list[dict[str, Any]]:
    return [_summary(cf) for cf in discover()]


@api.get("/connectors/{name}")
def connector(name: str) -> dict[str, Any]:
    from connectors.signals.notify import read_notifications

    cf = _find(name)
    assert cf.cfg is not None
    status = _status(cf)
    notes = read_notifications(cf.cfg.warehouse, cf.cfg.name)
    return (
        _summary(cf)
        | {"history": status["history"]}
        | {
            "snapshot": _snapshot(cf),
            "signalled_snapshot": _signalled_snapshot(notes),
            "notifications": _notifications(notes),
        }
    )


class SignalBody(BaseModel):
    action: str = Field(description="execute-snapshot, pause-snapshot, resume-snapshot or stop-snapshot")
    type: str = "incremental"
    tables: list[str] = []


@api.post("/connectors/{name}/signals")
def send(name: str, body: SignalBody) -> dict[str, Any]:
    """Write a snapshot signal for the connector to the Delta signal channel (checked as the
    connector will check it); returns its id."""
    from connectors.signals.catalog import TableCatalog
    from connectors.signals.model import SignalError, SignalRecord, TableInfo, parse
    from connectors.signals.tables import send_delta_signal

    cf = _find(name)
    assert cf.cfg is not None
    data: dict[str, Any] | None
    if body.action == "execute-snapshot":
        if not body.tables:
            raise HTTPException(422, "name the tables to snapshot")
        data = {"data-collections": body.tables, "type": body.type}
    elif body.action == "stop-snapshot":
        data = {"type": body.type} | ({"data-collections": body.tables} if body.tables else {})
    elif body.action in ("pause-snapshot", "resume-snapshot"):
        data = None
    else:
        raise HTTPException(422, f"unknown action {body.action!r}")
    info = TableInfo()
    if body.action == "execute-snapshot":
        from tidemark_airflow.config import runtime_config

        with runtime_config(cf.path) as (_, cfg):
            info = TableCatalog(cfg).info()
    record = SignalRecord(
        "page", body.action, None if data is None else orjson.dumps(data).decode(), "delta", "page"
    )
    try:
        parse(record, cf.cfg.connector, info)
    except SignalError as e:
        raise HTTPException(422, f"{body.action} refused: {e}") from None
    sid = send_delta_signal(cf.cfg.warehouse, cf.cfg.name, body.action, data)
    return {"id": sid, "action": body.action, "at": time.time()}


app.include_router(api)

PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>Tidemark connectors</title>
<style>
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin-bottom:1em}td,th{border:1px solid #ccc;padding:.3em .6em;text-align:left}
th{background:#f3f3f3}.err{color:#b00}.conn{border:1px solid #ddd;border-radius:6px;padding:1em;margin:1em 0}
canvas{border:1px solid #eee}small{color:#666}
</style></head><body>
<h1>Tidemark connectors</h1>
<p><small>From the Delta state tables (status, snapshots, notifications); refreshed every 5 s.</small></p>
<table id="summary"><thead><tr><th>connector</th><th>state</th><th>position</th><th>lag (ms)</th>
<th>events/s</th><th>last event</th><th>last error</th></tr></thead><tbody></tbody></table>
<div id="details"></div>
<script>
const esc = s => String(s ?? "").replace(/[&<>"']/g, c => ({"&":"&amp;","<":"&lt;",">":"&gt;",'"':"&quot;","'":"&#39;"}[c]));
async function j(url, opts) { const r = await fetch(url, Object.assign({credentials: "same-origin"}, opts));
  if (r.status === 401) {  // not logged in (or the token expired): Airflow's login, then back here
    location.assign(new URL("../auth/login?next=" + encodeURIComponent(location.pathname), location)); }
  const body = await r.json(); if (!r.ok) throw new Error(body.detail || r.statusText); return body; }
function chart(canvas, hist) {
  const g = canvas.getContext("2d"), w = canvas.width, h = canvas.height; g.clearRect(0, 0, w, h);
  if (!hist.length) return;
  const t0 = Date.now() - 3600e3, x = t => (new Date(t) - t0) / 3600e3 * w;
  for (const [key, color] of [["events_per_s", "#1f77b4"], ["lag_ms", "#d62728"]]) {
    const max = Math.max(1, ...hist.map(p => p[key] || 0)); g.strokeStyle = color; g.beginPath();
    hist.forEach((p, i) => { const y = h - (p[key] || 0) / max * (h - 4) - 2; i ? g.lineTo(x(p.at), y) : g.moveTo(x(p.at), y); });
    g.stroke();
  }
}
async function act(name, action) {
  const f = document.getElementById("f-" + name);
  const tables = f.tables.value.split(",").map(s => s.trim()).filter(Boolean);
  const out = document.getElementById("msg-" + name);
  try { const r = await j(`api/connectors/${name}/signals`, {method: "POST", headers: {"Content-Type": "application/json"},
        body: JSON.stringify({action, type: f.type.value, tables})});
        out.textContent = `${action} sent (signal ${r.id})`; out.className = ""; }
  catch (e) { out.textContent = e.message; out.className = "err"; }
}
async function refresh() {
  const list = await j("api/connectors");
  document.querySelector("#summary tbody").innerHTML = list.map(c => `<tr data-connector="${esc(c.name)}">
    <td>${esc(c.name)}</td><td class="state">${esc(c.state)}</td><td><code>${esc(JSON.stringify(c.position ?? null))}</code></td>
    <td class="lag">${esc(c.lag_ms)}</td><td>${c.events_per_s == null ? "" : c.events_per_s.toFixed(1)}</td>
    <td>${esc(c.last_event_at)}</td><td class="err">${esc(c.last_error)}</td></tr>`).join("");
  const box = document.getElementById("details");
  for (const c of list) {
    if (c.state === "invalid configuration") continue;
    let el = document.getElementById("c-" + c.name);
    if (!el) {
      el = document.createElement("div"); el.id = "c-" + c.name; el.className = "conn";
      el.innerHTML = `<h2>${esc(c.name)} <small>${esc(c.class)} · ${esc(c.file)}</small></h2>
        <canvas width="600" height="120"></canvas><br><small><span style="color:#1f77b4">events/s</span>,
        <span style="color:#d62728">lag</span>, last hour</small>
        <h3>Snapshot</h3><div class="snap"></div><div class="sig-snap"></div>
        <form id="f-${esc(c.name)}" onsubmit="return false">tables <input name="tables" size="40" placeholder="public.orders,public.items">
        <select name="type"><option>incremental</option><option>blocking</option></select>
        <button data-action="execute-snapshot">start snapshot</button> <button data-action="pause-snapshot">pause</button>
        <button data-action="resume-snapshot">resume</button> <button data-action="stop-snapshot">stop</button>
        <span id="msg-${esc(c.name)}"></span></form>
        <h3>Recent notifications</h3><table class="notes"><tbody></tbody></table>`;
      el.querySelectorAll("button").forEach(b => b.onclick = () => act(c.name, b.dataset.action));
      box.appendChild(el);
    }
    const d = await j(`api/connectors/${c.name}`);
    chart(el.querySelector("canvas"), d.history);
    const s = d.snapshot;
    el.querySelector(".snap").innerHTML = s ? `<span class="snap-state">${s.completed ? "COMPLETED" : "running"}</span>:
      chunks <span class="chunks">${s.chunks_done}/${s.chunks_total}</span>, ${s.rows} rows
      ${s.eta_s == null ? "" : ", about " + Math.round(s.eta_s) + " s left"} <small>(${esc(s.kind)}: ${esc(s.tables.join(", "))}, started ${esc(s.started_at)})</small>`
      : "none yet";
    const g = d.signalled_snapshot;
    el.querySelector(".sig-snap").innerHTML = g ? `${esc(g.kind)} snapshot <code>${esc(g.id)}</code>:
      <span class="sig-state">${esc(g.state)}</span>, <span class="sig-chunks">${g.chunks}</span> chunks,
      tables done <span class="sig-done">${g.tables_done.length}/${g.tables.length}</span> (${g.rows_done} rows)
      ${g.current_table ? `, reading ${esc(g.current_table)} at key ${esc(g.last_key)} of ${esc(g.maximum_key)}` : ""}
      <small>(${esc(g.tables.join(", "))}, started ${esc(g.started_at)})</small>` : "";
    el.querySelector(".notes tbody").innerHTML = d.notifications.map(n => `<tr><td>${esc(n.at)}</td>
      <td>${esc(n.aggregate_type)}</td><td class="ntype">${esc(n.type)}</td><td><small>${esc(JSON.stringify(n.additional_data))}</small></td></tr>`).join("");
  }
}
refresh().catch(e => document.body.insertAdjacentHTML("beforeend", `<p class="err">${esc(e.message)}</p>`));
setInterval(() => refresh().catch(() => {}), 5000);
</script></body></html>
"""


@app.get("/", response_class=HTMLResponse)
def page() -> str:
    return PAGE
