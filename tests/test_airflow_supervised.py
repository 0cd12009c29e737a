"""The stream DAG under a real, running Airflow 3 (`airflow standalone`: scheduler with the
LocalExecutor and its task supervisor, DAG processor, triggerer and API server; SQLite metadata
database in a temporary AIRFLOW_HOME) with a connector on the suite's PostgreSQL (`shop`) and one
on its MariaDB (`mshop`). Everything a user does goes through Airflow's REST API, as the UI does.

1. An incremental snapshot requested from the snapshot DAG's form: the `execute-snapshot`
   signal lands in `_state/signals`, the stream DAG's `read_chunks` task runs the chunk job
   through spark-submit (`tidemark.incremental.snapshot.reader=spark`), the running stream task
   (not a test process) emits the chunks, and the DAG's deferrable sensor completes on the COMPLETED notification in
   `_state/notifications` (which the status page's API lists too). Then the same from the
   status page in headless Chromium: its button starts one, the page shows it reach COMPLETED;
   and a scheduled one (`tidemark.airflow.snapshot.schedule`) of the configured tables. A
   blocking one from the DAG's form: the stream task's connector pauses, its Spark job reads the
   table, streaming goes on, the sensor completes. MariaDB: an incremental snapshot read by its
   own stream DAG's `read_chunks` task, then a blocking one.
2. The connector process is SIGKILLed: the stream task fails, Airflow retries it after its
   backoff, and the retry streams on from the stored offset: no change is lost. The task
   process is SIGKILLed (a dying worker): its connector stops cleanly, the retry streams on.
3. The running stream task is marked failed (the UI's "Mark as failed"): Airflow's supervisor
   stops the task, the operator's `on_kill` sends SIGTERM, and the connector stops cleanly —
   exit code 0, the final `stopped` health row, the slot acknowledged up to the last change.

The tests run in file order on one Airflow (starting it takes most of a minute).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import mycdc
import orjson
import pgcdc
import pytest
from cdc import delta_rows
from harness import free_port, unique_name, wait_until
from test_airflow_e2e import airflow_env

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
PASSWORD = "supervised-test-password"
CHROMIUM = "/usr/bin/chromium"
PREFIX = "afsup"
MY_PREFIX = "afsupmy"  # the MariaDB connector `mshop`
PARALLELISM = 2  # chunks the Spark job reads at once; it plans at most twice that many ahead
AHEAD_ROWS = 2 * PARALLELISM * 100  # rows of the chunks that may go out after a pause or stop
STREAM, SNAPSHOT = "tidemark_shop_stream", "tidemark_shop_snapshot"
MY_STREAM, MY_SNAPSHOT = "tidemark_mshop_stream", "tidemark_mshop_snapshot"
pytestmark = pytest.mark.timeout(600)


class Airflow:
    """Airflow's public REST API (`/api/v2`) as user admin, and the stack's files."""

    def __init__(self, url: str, home: Path, log: Path) -> None:
        self.url, self.home, self.log = url, home, log
        token = httpx.post(
            f"{url}/auth/token", json={"username": "admin", "password": PASSWORD}, timeout=30
        ).json()["access_token"]
        self.http = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30)

    def call(self, method: str, path: str, **kw: Any) -> Any:
        r = self.http.request(method, path, **kw)
        assert r.status_code < 300, f"{method} {path}: {r.status_code} {r.text[:2000]}"
        return r.json() if r.content else None

    def unpause(self, dag_id: str, paused: bool = False) -> None:
        self.call("PATCH", f"/api/v2/dags/{dag_id}", json={"is_paused": paused})

    def runs(self, dag_id: str) -> list[dict[str, Any]]:
        got = self.call("GET", f"/api/v2/dags/{dag_id}/dagRuns", params={"order_by": "-run_after"})
        return list(got["dag_runs"])

    def ti(self, dag_id: str, run_id: str, task_id: str) -> dict[str, Any]:
        return dict(self.call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}"))

    def tail(self, n: int = 6000) -> str:
        """The end of the standalone log and of every task log: what a failure report needs."""
        parts = [self.log.read_text(errors="replace")[-n:]]
        for f in sorted((self.home / "logs").rglob("*.log"))[-4:]:
            parts.append(f"--- {f}\n" + f.read_text(errors="replace")[-n:])
        return "\n".join(parts)

    def task_logs(self, dag_id: str) -> str:
        return "\n".join(
            f.read_text(errors="replace")
            for f in sorted((self.home / "logs").rglob("*.log"))
            if f"dag_id={dag_id}" in str(f)
        )


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the process group (its own session), SIGKILL if it does not stop in time."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


@pytest.fixture(scope="module")
def shop(pg: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A database with `items` (500 rows) and the signal table, and its connector file."""
    work = tmp_path_factory.mktemp("af_sup")
    db = pg.create_database(unique_name("supdb"))
    conn = pg.connect(dbname=db)
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL)")
        cur.execute("INSERT INTO items SELECT g, 'item ' || g FROM generate_series(1, 500) g")
        cur.execute(
            "CREATE TABLE debezium_signal (id varchar(64) PRIMARY KEY, type varchar(32) NOT NULL, data text)"
        )
    connectors = work / "connectors"
    connectors.mkdir()
    slot = unique_name("supslot")
    pgcdc.write_config(
        connectors / "shop.properties",
        pg,
        slot=slot,
        dbname=db,
        prefix=PREFIX,
        sinks="delta",
        warehouse=work / "warehouse",
        # No data snapshot at the first start: the snapshot rows of this test are the incremental one's.
        snapshot__mode="no_data",
        signal__data__collection="public.debezium_signal",
        signal__poll__interval__ms="200",
        incremental__snapshot__chunk__size="100",
        # Chunks read by the Spark job, which the stream DAG's read_chunks task runs (spark-submit)
        tidemark__incremental__snapshot__reader="spark",
        tidemark__incremental__snapshot__parallelism=str(PARALLELISM),
    )
    yield {
        "conn": conn,
        "warehouse": work / "warehouse",
        "connectors": connectors,
        "slot": slot,
        "db": db,
        "prefix": PREFIX,
    }
    conn.close()
    with pg.connect() as c, c.cursor() as cur:
        cur.execute(
            "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots "
            "WHERE slot_name = %s AND active_pid IS NOT NULL",
            (slot,),
        )
        cur.execute(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = %s",
            (slot,),
        )
    pg.drop_database(db)


@pytest.fixture(scope="module")
def mshop(
    mariadb: Any, shop: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """A MariaDB database with `items` (300 rows) and the signal table, and its connector file
    `mshop.properties` next to `shop`'s (its DAGs wait paused until its test)."""
    from connectors.app.embedded.util import unique_server_id

    work = tmp_path_factory.mktemp("af_sup_my")
    db = mariadb.create_database(unique_name("supmy"))
    mariadb.execute("CREATE TABLE items (id int PRIMARY KEY, name varchar(32) NOT NULL)", database=db)
    mariadb.execute("INSERT INTO items SELECT seq, concat('item ', seq) FROM seq_1_to_300", database=db)
    mariadb.execute(
        "CREATE TABLE debezium_signal (id varchar(64) PRIMARY KEY, type varchar(32) NOT NULL, data text)",
        database=db,
    )
    mycdc.write_config(
        shop["connectors"] / "mshop.properties",
        mariadb,
        server_id=unique_server_id(),
        db=db,
        prefix=MY_PREFIX,
        sinks="delta",
        warehouse=work / "warehouse",
        signal__data__collection=f"{db}.debezium_signal",
        signal__poll__interval__ms="200",
        incremental__snapshot__chunk__size="100",
        tidemark__incremental__snapshot__reader="spark",
        tidemark__incremental__snapshot__parallelism=str(PARALLELISM),
    )
    yield {"server": mariadb, "db": db, "warehouse": work / "warehouse", "prefix": MY_PREFIX}
    mariadb.drop_database(db)


@pytest.fixture(scope="module")
def airflow(
    shop: dict[str, Any], mshop: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Airflow]:
    """`airflow standalone` on a free port, its DAGs parsed; user admin / PASSWORD."""
    work = tmp_path_factory.mktemp("af_sup_home")
    home = work / "airflow"
    home.mkdir()
    # The simple auth manager reads the users' passwords from this file (it only generates missing ones).
    (home / "simple_auth_manager_passwords.json.generated").write_text(json.dumps({"admin": PASSWORD}))
    port = free_port()
    env = airflow_env(home, shop["connectors"], {})
    env.update(
        AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS="admin:admin",
        AIRFLOW__API__PORT=str(port),
        AIRFLOW__API__HOST="127.0.0.1",
        AIRFLOW__CORE__EXECUTION_API_SERVER_URL=f"http://127.0.0.1:{port}/execution/",
        AIRFLOW__CORE__PARALLELISM="8",
        AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL="5",
    )
    log = work / "standalone.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(BIN / "airflow"), "standalone"],
            env=env,
            cwd=work,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"

    def ready() -> Airflow | None:
        assert proc.poll() is None, f"airflow standalone exited with {proc.returncode}"
        af = Airflow(url, home, log)
        dags = {d["dag_id"] for d in af.call("GET", "/api/v2/dags", params={"limit": 100})["dags"]}
        return af if {STREAM, SNAPSHOT, MY_STREAM, MY_SNAPSHOT} <= dags else None

    try:
        af = wait_until(
            ready,
            240,
            "airflow standalone serving the tidemark DAGs",
            interval=1,
            on_timeout=lambda: log.read_text(errors="replace")[-5000:],
        )
        yield af
    finally:
        stop(proc)


def status(shop: dict[str, Any]) -> list[dict[str, Any]]:
    from connectors.engine.status import read_status

    return read_status(shop["warehouse"], shop["prefix"])


def running_pid(shop: dict[str, Any], not_pid: int | None = None) -> int | None:
    """The pid of the connector that reported `running` in the last 20 s (other than `not_pid`)."""
    rows = [r for r in status(shop) if r["pid"] != not_pid]
    if rows and rows[-1]["state"] == "running" and time.time() - rows[-1]["at"].timestamp() < 20:
        return int(rows[-1]["pid"])
    return None


def changes(shop: dict[str, Any], op: str, table: str = "public.items") -> list[int]:
    """The ids of the `table` change events with `op` in the change log."""
    changelog = shop["warehouse"] / shop["prefix"] / "changelog"
    if not changelog.exists():
        return []
    rows = delta_rows(changelog, ["collection", "op", "key"])
    return [orjson.loads(r["key"])["id"] for r in rows if r["collection"] == table and r["op"] == op]


def insert(shop: dict[str, Any], ids: range) -> None:
    with shop["conn"].cursor() as cur:
        cur.execute(
            "INSERT INTO items SELECT g, 'new ' || g FROM generate_series(%s, %s) g",
            (ids.start, ids.stop - 1),
        )


def stream_run(af: Airflow) -> dict[str, Any]:
    runs = [r for r in af.runs(STREAM) if r["state"] == "running"]
    assert len(runs) == 1, runs  # max_active_runs=1
    return runs[0]


def snapshot_run(af: Airflow, dag_id: str, conf: dict[str, Any]) -> dict[str, Any]:
    """A run of snapshot DAG `dag_id` triggered with `conf` (the trigger form), once it succeeded."""
    run = af.call("POST", f"/api/v2/dags/{dag_id}/dagRuns", json={"logical_date": None, "conf": conf})
    assert run_end(af, dag_id, run["dag_run_id"])["state"] == "success", af.tail()
    return dict(run)


def run_end(af: Airflow, dag_id: str, run_id: str) -> dict[str, Any]:
    """Run `run_id` of `dag_id` once it succeeded or failed."""
    return dict(
        wait_until(
            lambda: (
                r
                if (r := af.call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}"))["state"]
                in ("success", "failed")
                else None
            ),
            300,
            f"the {dag_id} run ends",
            interval=2,
            on_timeout=af.tail,
        )
    )


def test_incremental_snapshot_from_the_dag_runs_in_the_supervised_stream(
    airflow: Airflow, shop: dict[str, Any]
) -> None:
    af = airflow
    af.unpause(STREAM)  # @continuous: the scheduler starts the run at once
    pid = wait_until(
        lambda: running_pid(shop),
        180,
        "the stream task's connector reports `running`",
        interval=1,
        on_timeout=af.tail,
    )
    insert(shop, range(1001, 1011))  # streaming works before the snapshot
    wait_until(lambda: len(changes(shop, "c")) == 10, 60, "10 inserts in the change log", interval=1)

    af.unpause(SNAPSHOT)
    run = snapshot_run(af, SNAPSHOT, {"type": "incremental", "tables": ["public.items"]})
    # The run went through the signal, not the Spark job, and the sensor deferred on the trigger.
    states = {
        t: af.ti(SNAPSHOT, run["dag_run_id"], t)["state"]
        for t in ("check", "send_signal", "initial_snapshot", "wait_for_snapshot")
    }
    assert states == {
        "check": "success",
        "send_signal": "success",
        "initial_snapshot": "skipped",
        "wait_for_snapshot": "success",
    }
    sent = af.call(
        "GET",
        f"/api/v2/dags/{SNAPSHOT}/dagRuns/{run['dag_run_id']}/taskInstances/send_signal/xcomEntries/return_value",
    )["value"]
    sid = (sent if isinstance(sent, dict) else json.loads(sent))["signal_id"]

    signals = delta_rows(shop["warehouse"] / "_state" / "signals", ["id", "type", "data", "connector"])
    (row,) = [s for s in signals if s["id"] == sid]
    assert row["type"] == "execute-snapshot" and row["connector"] == PREFIX
    assert json.loads(row["data"])["data-collections"] == ["public.items"]
    # The same connector process (the stream task's, never restarted) emitted every row in chunks,
    # read by the chunk job the stream DAG's read_chunks task ran through spark-submit.
    assert running_pid(shop) == pid
    logs = af.task_logs(STREAM)
    assert "starting the chunk job" in logs and "chunks read" in logs, af.tail()
    assert "incremental snapshot: starting the chunk job" not in logs  # (the connector's own launcher)
    assert sorted(changes(shop, "r")) == [*range(1, 501), *range(1001, 1011)]
    from connectors.signals.notify import read_notifications

    mine = [n for n in read_notifications(shop["warehouse"], PREFIX) if n["id"] == sid]
    kinds = [n["type"] for n in mine]
    assert "STARTED" in kinds and kinds[-1] == "COMPLETED", kinds
    assert kinds.count("IN_PROGRESS") >= 5  # 510 rows in chunks of 100
    # The sensor's log names the notification it completed on.
    assert "Incremental Snapshot COMPLETED" in af.task_logs(SNAPSHOT)
    # The status page (the plugin on the same API server) lists the notifications.
    page = af.call("GET", "/tidemark/api/connectors/shop")
    assert any(n["id"] == sid and n["type"] == "COMPLETED" for n in page["notifications"])
    assert page["state"] == "running"


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is missing: run .ci/setup")
def test_incremental_snapshot_from_the_status_page_reaches_completed(
    airflow: Airflow, shop: dict[str, Any]
) -> None:
    """Headless Chromium (Playwright) on the plugin's page: log in, see the supervised
    connector running with its lag, start an incremental snapshot, watch it reach COMPLETED."""
    import re

    from playwright.sync_api import expect, sync_playwright

    af = airflow
    pid = wait_until(lambda: running_pid(shop), 60, "a running connector", interval=1, on_timeout=af.tail)
    snapshot_rows = len(changes(shop, "r"))
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            page = _page(browser, af)
            row = page.locator('#summary tr[data-connector="shop"]')
            expect(row.locator(".state")).to_have_text("running")
            expect(row.locator(".lag")).to_have_text(re.compile(r"^\d+$"))
            box = page.locator("#c-shop")
            # The DAG's snapshot of the previous test is shown as the newest one, ended.
            expect(box.locator(".sig-state")).to_have_text("COMPLETED")

            form, msg = box.locator("form"), box.locator("#msg-shop")
            form.locator("input[name=tables]").fill("public.items")
            form.locator("select[name=type]").select_option("incremental")
            form.locator("button[data-action=execute-snapshot]").click()
            expect(msg).to_have_text(re.compile(r"execute-snapshot sent \(signal [0-9a-f-]{36}\)"))
            found = re.search(r"signal ([0-9a-f-]{36})", msg.inner_text())
            assert found is not None
            sid = found.group(1)
            # The page (refreshed every 5 s) follows this snapshot until the stream completes it.
            sig = box.locator(".sig-snap")
            expect(sig.locator("code")).to_have_text(sid, timeout=60_000)
            expect(sig.locator(".sig-state")).to_have_text("COMPLETED", timeout=120_000)
            expect(sig.locator(".sig-done")).to_have_text("1/1")
            assert int(sig.locator(".sig-chunks").inner_text()) >= 5
            expect(sig).to_contain_text("510 rows")
        finally:
            browser.close()
    assert len(changes(shop, "r")) == snapshot_rows + 510
    assert running_pid(shop) == pid  # read by the stream task's connector, still the same process


def _page(browser: Any, af: Airflow) -> Any:
    """The plugin's page in `browser`, logged in."""
    import re

    page = browser.new_page()
    page.set_default_timeout(30_000)
    page.goto(f"{af.url}/tidemark/")
    page.wait_for_url(re.compile(r"/auth/login"))
    page.fill("input[name=username]", "admin")
    page.fill("input[name=password]", PASSWORD)
    page.click("button:has-text('Sign in')")
    page.wait_for_url(re.compile(r"/tidemark/$"))
    return page


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is missing: run .ci/setup")
def test_pause_resume_and_stop_from_the_status_page(airflow: Airflow, shop: dict[str, Any]) -> None:
    """The page's pause, resume and stop buttons on a running incremental snapshot of a 100,000-row
    table (1,000 chunks): the page shows PAUSED and the change log stops growing, RESUMED and it
    grows again, ABORTED and the snapshot ends before the table is read, no row twice."""
    import re

    from playwright.sync_api import expect, sync_playwright

    af = airflow
    wait_until(lambda: running_pid(shop), 60, "a running connector", interval=1, on_timeout=af.tail)
    with shop["conn"].cursor() as cur:
        cur.execute("CREATE TABLE big (id int PRIMARY KEY, name text NOT NULL)")
        cur.execute("INSERT INTO big SELECT g, 'big ' || g FROM generate_series(1, 100000) g")
    wait_until(lambda: len(changes(shop, "c", "public.big")) == 100_000, 120, "big streamed")

    def read() -> int:
        return len(changes(shop, "r", "public.big"))

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            page = _page(browser, af)
            box = page.locator("#c-shop")
            form, msg, sig = box.locator("form"), box.locator("#msg-shop"), box.locator(".sig-snap")
            form.locator("input[name=tables]").fill("public.big")
            form.locator("select[name=type]").select_option("incremental")
            form.locator("button[data-action=execute-snapshot]").click()
            expect(msg).to_have_text(re.compile(r"execute-snapshot sent"))
            sid = re.search(r"signal ([0-9a-f-]{36})", msg.inner_text())
            assert sid is not None
            expect(sig.locator("code")).to_have_text(sid.group(1), timeout=60_000)
            wait_until(lambda: read() >= 300, 60, "chunks in the change log")

            form.locator("button[data-action=pause-snapshot]").click()
            expect(msg).to_have_text(re.compile(r"pause-snapshot sent"))
            expect(sig.locator(".sig-state")).to_have_text("PAUSED", timeout=60_000)
            held = read()
            page.wait_for_timeout(6_000)  # (two page refreshes)
            paused_at = read()
            assert paused_at <= held + AHEAD_ROWS  # the chunks being read then, and those read ahead
            page.wait_for_timeout(4_000)
            assert read() == paused_at, "chunks went out while the snapshot was paused"
            expect(sig.locator(".sig-state")).to_have_text("PAUSED")

            form.locator("button[data-action=resume-snapshot]").click()
            expect(msg).to_have_text(re.compile(r"resume-snapshot sent"))
            expect(sig.locator(".sig-state")).to_have_text(re.compile("RESUMED|IN_PROGRESS"), timeout=60_000)
            wait_until(lambda: read() >= paused_at + 300, 60, "chunks after the resume")

            form.locator("button[data-action=stop-snapshot]").click()
            expect(msg).to_have_text(re.compile(r"stop-snapshot sent"))
            expect(sig.locator(".sig-state")).to_have_text("ABORTED", timeout=60_000)
        finally:
            browser.close()
    stopped = read()
    ids = changes(shop, "r", "public.big")
    assert len(ids) == len(set(ids)) and stopped < 100_000
    # nothing goes out after the stop but what was in flight (a row streamed later lands after)
    with shop["conn"].cursor() as cur:
        cur.execute("INSERT INTO big VALUES (100001, 'after stop')")
    wait_until(lambda: 100_001 in changes(shop, "c", "public.big"), 60, "a change after the stop")
    assert read() <= stopped + AHEAD_ROWS


def test_blocking_snapshot_from_the_dag_pauses_the_supervised_stream(
    airflow: Airflow, shop: dict[str, Any]
) -> None:
    """`type: blocking` from the snapshot DAG's form: the running stream task's connector pauses,
    its Spark job snapshots the table, and streaming goes on from where it paused."""
    af = airflow
    pid = wait_until(lambda: running_pid(shop), 60, "a running connector", interval=1, on_timeout=af.tail)
    before = len(changes(shop, "r"))
    run = snapshot_run(af, SNAPSHOT, {"type": "blocking", "tables": ["public.items"]})
    assert af.ti(SNAPSHOT, run["dag_run_id"], "send_signal")["state"] == "success"
    assert len(changes(shop, "r")) == before + 510  # every row of items, once
    with shop["conn"].cursor() as cur:
        cur.execute("INSERT INTO big VALUES (100002, 'after the blocking snapshot')")
    wait_until(lambda: 100_002 in changes(shop, "c", "public.big"), 60, "a change after the snapshot")
    assert running_pid(shop) == pid  # the same stream task's connector paused and went on
    assert "streaming resumes where it paused" in af.task_logs(STREAM), af.tail()
    # The sensor ended on the job's notification (Debezium's blocking snapshots send the initial
    # snapshot's); the status page shows the job's progress.
    assert "Initial Snapshot COMPLETED" in af.task_logs(SNAPSHOT)
    job = af.call("GET", "/tidemark/api/connectors/shop")["snapshot"]
    assert job["kind"] == "blocking" and job["completed"] and job["rows"] == 510, job


def test_mariadb_incremental_and_blocking_snapshots_from_the_dags(
    airflow: Airflow, mshop: dict[str, Any]
) -> None:
    """The MariaDB connector under the same Airflow: its stream DAG streams, an incremental
    snapshot from its snapshot DAG is read by the chunk job of its `read_chunks` task
    (spark-submit) and emitted by the stream task's connector, then a blocking one pauses it."""
    af, server, db = airflow, mshop["server"], mshop["db"]
    table = f"{db}.items"
    af.unpause(MY_STREAM)
    try:
        pid = wait_until(
            lambda: running_pid(mshop),
            180,
            "the MariaDB stream task's connector reports `running`",
            interval=1,
            on_timeout=af.tail,
        )
        server.execute("INSERT INTO items SELECT seq, concat('new ', seq) FROM seq_1001_to_1010", database=db)
        wait_until(
            lambda: len(changes(mshop, "c", table)) == 10, 60, "10 inserts in the change log", interval=1
        )

        af.unpause(MY_SNAPSHOT)
        run = snapshot_run(af, MY_SNAPSHOT, {"type": "incremental", "tables": [table]})
        assert sorted(changes(mshop, "r", table)) == [*range(1, 301), *range(1001, 1011)]
        logs = af.task_logs(MY_STREAM)
        assert "starting the chunk job" in logs and "chunks read" in logs, af.tail()
        assert "Incremental Snapshot COMPLETED" in af.task_logs(MY_SNAPSHOT)

        run = snapshot_run(af, MY_SNAPSHOT, {"type": "blocking", "tables": [table]})
        assert af.ti(MY_SNAPSHOT, run["dag_run_id"], "send_signal")["state"] == "success"
        assert sorted(changes(mshop, "r", table)) == sorted(2 * [*range(1, 301), *range(1001, 1011)])
        server.execute("INSERT INTO items VALUES (2001, 'after the blocking snapshot')", database=db)
        wait_until(lambda: 2001 in changes(mshop, "c", table), 60, "a change after the snapshot")
        assert running_pid(mshop) == pid
    finally:
        af.unpause(MY_SNAPSHOT, paused=True)
        stop_stream(af, MY_STREAM)


def stop_stream(af: Airflow, dag_id: str) -> None:
    """Pause stream DAG `dag_id` and mark its running task failed (the UI's "Mark as failed"):
    its connector stops."""
    af.unpause(dag_id, paused=True)
    for run in af.runs(dag_id):
        if run["state"] == "running":
            af.call(
                "PATCH",
                f"/api/v2/dags/{dag_id}/dagRuns/{run['dag_run_id']}/taskInstances/stream",
                json={"new_state": "failed"},
            )


def test_scheduled_incremental_snapshot_of_the_configured_tables(
    airflow: Airflow, shop: dict[str, Any]
) -> None:
    """`tidemark.airflow.snapshot.schedule` (cron) and `tidemark.airflow.snapshot.tables`: the
    DAG processor picks the schedule up from the connector file, the scheduler starts a
    `scheduled` run, and it snapshots the configured tables through the running stream."""
    af = airflow
    pid = wait_until(lambda: running_pid(shop), 60, "a running connector", interval=1, on_timeout=af.tail)
    snapshot_rows = len(changes(shop, "r"))
    path = shop["connectors"] / "shop.properties"
    original = path.read_text()
    path.write_text(
        original
        + "tidemark.airflow.snapshot.schedule=* * * * *\ntidemark.airflow.snapshot.tables=public.items\n"
    )
    run = wait_until(
        lambda: next((r for r in af.runs(SNAPSHOT) if r["run_type"] == "scheduled"), None),
        240,
        "a scheduled run of the snapshot DAG",
        interval=2,
        on_timeout=af.tail,
    )
    final = run_end(af, SNAPSHOT, run["dag_run_id"])
    # One scheduled run is enough. Not earlier: a paused DAG's tasks are not queued, and the
    # run's tasks read the file.
    af.unpause(SNAPSHOT, paused=True)
    path.write_text(original)
    assert final["state"] == "success", af.tail()
    sent = af.call(
        "GET",
        f"/api/v2/dags/{SNAPSHOT}/dagRuns/{run['dag_run_id']}/taskInstances/send_signal/xcomEntries/return_value",
    )["value"]
    sid = (sent if isinstance(sent, dict) else json.loads(sent))["signal_id"]
    signals = delta_rows(shop["warehouse"] / "_state" / "signals", ["id", "data"])
    (row,) = [s for s in signals if s["id"] == sid]
    assert json.loads(row["data"]) == {"data-collections": ["public.items"], "type": "incremental"}
    from connectors.signals.notify import read_notifications

    mine = [n for n in read_notifications(shop["warehouse"], PREFIX) if n["id"] == sid]
    scans = [n["additional_data"] for n in mine if n["type"] == "TABLE_SCAN_COMPLETED"]
    assert [(d["scanned_collection"], d["total_rows_scanned"]) for d in scans] == [("public.items", "510")]
    assert mine[-1]["type"] == "COMPLETED"
    # (A second scheduled run may have started before the pause: at least this one's rows.)
    assert len(changes(shop, "r")) >= snapshot_rows + 510
    assert running_pid(shop) == pid


def test_killed_connector_is_retried_and_streams_on_without_loss(
    airflow: Airflow, shop: dict[str, Any]
) -> None:
    af = airflow
    pid = wait_until(lambda: running_pid(shop), 60, "a running connector", interval=1, on_timeout=af.tail)
    run = stream_run(af)
    before = af.ti(STREAM, run["dag_run_id"], "stream")
    insert(shop, range(2001, 2051))
    os.kill(pid, signal.SIGKILL)
    insert(shop, range(2051, 2101))  # while no connector runs

    # The same run's task is retried (after 15-30 s: retry_delay 15 s, exponential backoff).
    def retried() -> dict[str, Any] | None:
        ti = af.ti(STREAM, run["dag_run_id"], "stream")
        return ti if ti["try_number"] > before["try_number"] and ti["state"] == "running" else None

    after = wait_until(retried, 120, "the stream task retried", interval=1, on_timeout=af.tail)
    new_pid = wait_until(
        lambda: running_pid(shop, not_pid=pid),
        120,
        "the retry's connector reports `running`",
        interval=1,
        on_timeout=af.tail,
    )
    assert new_pid != pid and after["try_number"] == before["try_number"] + 1
    wait_until(
        lambda: set(range(2001, 2101)) <= set(changes(shop, "c")),
        120,
        "every insert around the kill in the change log",
        interval=1,
        on_timeout=af.tail,
    )
    assert stream_run(af)["dag_run_id"] == run["dag_run_id"]
    logs = af.task_logs(STREAM)
    assert "was killed by SIGKILL" in logs, af.tail()


def test_when_the_task_process_dies_its_connector_stops_cleanly_and_the_task_is_retried(
    airflow: Airflow, shop: dict[str, Any]
) -> None:
    """The task process (not the connector) is SIGKILLed, as when a worker dies: the kernel
    sends the connector SIGTERM (parent-death signal), it stops cleanly instead of streaming on
    as an orphan next to the retry, and the retry streams on."""
    af = airflow
    pid = wait_until(lambda: running_pid(shop), 60, "a running connector", interval=1, on_timeout=af.tail)
    assert os.getpgid(pid) == pid  # a process group of its own (see operators._connector_child)
    task_pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    run = stream_run(af)
    before = af.ti(STREAM, run["dag_run_id"], "stream")
    os.kill(task_pid, signal.SIGKILL)
    final = wait_until(
        lambda: next((r for r in status(shop) if r["pid"] == pid and r["state"] != "running"), None),
        60,
        "the orphaned connector's final health row",
        interval=1,
        on_timeout=af.tail,
    )
    assert final["state"] == "stopped" and final["error"] is None, final
    insert(shop, range(2501, 2511))
    wait_until(
        lambda: running_pid(shop, not_pid=pid), 300, "the retry's connector", interval=2, on_timeout=af.tail
    )
    assert af.ti(STREAM, run["dag_run_id"], "stream")["try_number"] > before["try_number"]
    wait_until(lambda: set(range(2501, 2511)) <= set(changes(shop, "c")), 120, "the inserts", interval=1)


def test_marking_the_stream_task_stops_the_connector_cleanly(
    pg: Any, airflow: Airflow, shop: dict[str, Any]
) -> None:
    af = airflow
    pid = wait_until(lambda: running_pid(shop), 60, "a running connector", interval=1, on_timeout=af.tail)
    run = stream_run(af)
    af.unpause(STREAM, paused=True)  # else @continuous starts the next run at once
    insert(shop, range(3001, 3021))
    wait_until(lambda: set(range(3001, 3021)) <= set(changes(shop, "c")), 60, "the inserts", interval=1)

    # What the UI's "Mark as failed" on the running task does.
    af.call(
        "PATCH",
        f"/api/v2/dags/{STREAM}/dagRuns/{run['dag_run_id']}/taskInstances/stream",
        json={"new_state": "failed"},
    )
    final = wait_until(
        lambda: next((r for r in status(shop) if r["pid"] == pid and r["state"] != "running"), None),
        90,
        "the connector's final health row",
        interval=1,
        on_timeout=af.tail,
    )
    assert final["state"] == "stopped" and final["error"] is None, final

    def gone() -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False

    wait_until(gone, 60, "the connector process exits", interval=0.5)
    # The slot is released and acknowledged up to the last change the change log holds.
    changelog = shop["warehouse"] / PREFIX / "changelog"
    last_lsn = max(r["lsn"] or 0 for r in delta_rows(changelog, ["lsn"]))
    with pg.connect() as c, c.cursor() as cur:
        cur.execute(
            "SELECT active, confirmed_flush_lsn - '0/0'::pg_lsn FROM pg_replication_slots WHERE slot_name = %s",
            (shop["slot"],),
        )
        active, confirmed = cur.fetchone()
    assert not active
    assert int(confirmed) >= last_lsn
    logs = af.task_logs(STREAM)
    assert f"stopping the connector (SIGTERM to pid {pid})" in logs, af.tail()
    # The run ends failed, as marked, and no other run of the paused DAG starts.
    ended = wait_until(
        lambda: (
            r
            if (r := af.call("GET", f"/api/v2/dags/{STREAM}/dagRuns/{run['dag_run_id']}"))["state"]
            != "running"
            else None
        ),
        60,
        "the stream run ends",
        interval=1,
        on_timeout=af.tail,
    )
    assert ended["state"] == "failed"
    assert af.ti(STREAM, run["dag_run_id"], "stream")["state"] == "failed"
    assert [r["dag_run_id"] for r in af.runs(STREAM)] == [run["dag_run_id"]]
    creates = changes(shop, "c")
    assert sorted(set(creates)) == [
        *range(1001, 1011),
        *range(2001, 2101),
        *range(2501, 2511),
        *range(3001, 3021),
    ]
