"""The status page in a running Airflow, in a headless browser: Debian's `chromium` driven by
Playwright (no browser download), against `airflow api-server` with the project's dags/ and
plugins/ (SQLite metadata database in a temporary AIRFLOW_HOME) and a connector on the suite's
PostgreSQL.

The browser logs in through Airflow's own login form (the page sends an unauthenticated visitor
there), sees the running connector with its state and lag and the initial snapshot's progress,
and starts an incremental snapshot from the page: the request lands in `<warehouse>/_state/signals`;
a table the connector does not capture is refused on the page and writes nothing.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pgcdc
import pytest
from cdc import delta_rows
from harness import free_port, wait_until
from test_airflow_e2e import airflow_env

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
CHROMIUM = "/usr/bin/chromium"
PASSWORD = "page-test-password"
pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is missing: run .ci/setup"),
]


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the process group (its own session), SIGKILL if it does not stop in time."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


@pytest.fixture
def shop(pg: Any, pg_database: str, unique_name: Any, tmp_path: Path) -> dict[str, Any]:
    """A database with `items` (captured) and `other` (not captured) and its connector file."""
    conn = pg.connect(dbname=pg_database)
    try:
        with conn.cursor() as cur:
            cur.execute("CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL)")
            cur.execute("INSERT INTO items SELECT g, 'item ' || g FROM generate_series(1, 500) g")
            cur.execute("CREATE TABLE other (id int PRIMARY KEY)")
    finally:
        conn.close()
    connectors = tmp_path / "connectors"
    connectors.mkdir()
    warehouse = tmp_path / "warehouse"
    config = pgcdc.write_config(
        connectors / "shop.properties",
        pg,
        slot=unique_name("pageslot"),
        dbname=pg_database,
        prefix="afpage",
        sinks="delta",
        warehouse=warehouse,
        snapshot__mode="initial",
        table__include__list="public.items",
        # As under Airflow (the DAGs add it): the snapshot's notifications go to the table the page reads.
        notification__enabled__channels="delta",
        tidemark__spark__master="local[2]",
        tidemark__spark__conf__spark__ui__enabled="false",
    )
    return {"config": config, "connectors": connectors, "warehouse": warehouse, "db": pg_database}


@pytest.fixture
def api_server(shop: dict[str, Any], tmp_path: Path) -> Iterator[str]:
    """`airflow api-server` on a free port; yields its base URL. User `admin`, password PASSWORD."""
    home = tmp_path / "airflow"
    home.mkdir()
    # The simple auth manager reads the users' passwords from this file (it only generates missing ones).
    (home / "simple_auth_manager_passwords.json.generated").write_text(json.dumps({"admin": PASSWORD}))
    port = free_port()
    env = airflow_env(home, shop["connectors"], {})
    env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"] = "admin:admin"
    subprocess.run(
        [str(BIN / "airflow"), "db", "migrate"], env=env, check=True, capture_output=True, timeout=180
    )
    log = (tmp_path / "api-server.log").open("wb")
    proc = subprocess.Popen(
        [str(BIN / "airflow"), "api-server", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        cwd=tmp_path,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        assert proc.poll() is None, f"airflow api-server exited with {proc.returncode}"
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True

    try:
        wait_until(up, 90, "airflow api-server listening", interval=0.25)
        yield url
    finally:
        stop(proc)
        log.close()


def tidemark(*args: str, log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [str(BIN / "tidemark"), *args],
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        cwd=ROOT,
        start_new_session=True,
    )


def test_status_page_in_a_running_airflow(
    pg: Any, shop: dict[str, Any], api_server: str, tmp_path: Path
) -> None:
    from playwright.sync_api import expect, sync_playwright

    from connectors.engine.status import read_status

    config, warehouse = str(shop["config"]), shop["warehouse"]
    # The initial snapshot (Spark job), then the connector streams and reports its health every second.
    snap = subprocess.run(
        [str(BIN / "tidemark"), "snapshot", "--config", config],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
    )
    assert snap.returncode == 0, snap.stdout[-3000:] + snap.stderr[-3000:]
    stream = tidemark("run", "--config", config, "--status-interval", "1", log=tmp_path / "stream.log")
    try:
        conn = pg.connect(dbname=shop["db"])
        try:
            with conn.cursor() as cur:
                cur.execute("UPDATE items SET name = 'renamed' WHERE id <= 20")
        finally:
            conn.close()
        wait_until(
            lambda: any(
                r["state"] == "running" and r["events"] >= 20 for r in read_status(warehouse, "afpage")
            ),
            60,
            "the connector reports the 20 updates",
            interval=0.25,
            on_timeout=lambda: (tmp_path / "stream.log").read_text()[-3000:],
        )

        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True)
            try:
                page = browser.new_page()
                page.set_default_timeout(20_000)
                # Not logged in: the page sends the browser to Airflow's login, which comes back.
                page.goto(f"{api_server}/tidemark/")
                page.wait_for_url(re.compile(r"/auth/login"))
                page.fill("input[name=username]", "admin")
                page.fill("input[name=password]", PASSWORD)
                page.click("button:has-text('Sign in')")
                page.wait_for_url(re.compile(r"/tidemark/$"))

                row = page.locator('#summary tr[data-connector="shop"]')
                expect(row.locator(".state")).to_have_text("running")
                expect(row.locator(".lag")).to_have_text(re.compile(r"^\d+$"))
                assert '"lsn' in row.locator("code").inner_text()  # the source position
                # The initial snapshot's progress: every chunk done, the table's 500 rows.
                box = page.locator("#c-shop")
                expect(box.locator(".snap-state")).to_have_text("COMPLETED")
                chunks = box.locator(".chunks").inner_text()
                done, total = (int(n) for n in chunks.split("/"))
                assert done == total >= 1, chunks
                expect(box.locator(".snap")).to_contain_text("500 rows")
                expect(box.locator(".snap")).to_contain_text("public.items")
                # The snapshot's notifications (the stream's SKIPPED follows: the data is there).
                completed = box.locator(".ntype").filter(has_text=re.compile(r"^COMPLETED$"))
                expect(completed).to_have_count(1)

                form, msg = box.locator("form"), box.locator("#msg-shop")
                # A table the connector does not capture: refused on the page, no signal written.
                form.locator("input[name=tables]").fill("public.other")
                form.locator("button[data-action=execute-snapshot]").click()
                expect(msg).to_contain_text("refused")
                expect(msg).to_contain_text("public.other")
                # An incremental snapshot of a captured table: the signal is written.
                form.locator("input[name=tables]").fill("public.items")
                form.locator("select[name=type]").select_option("incremental")
                form.locator("button[data-action=execute-snapshot]").click()
                expect(msg).to_have_text(re.compile(r"execute-snapshot sent \(signal [0-9a-f-]{36}\)"))
                sid = re.search(r"signal ([0-9a-f-]{36})", msg.inner_text())
                assert sid is not None
            finally:
                browser.close()
    finally:
        stop(stream)
    assert stream.returncode == 0, (tmp_path / "stream.log").read_text()[-3000:]

    signals = delta_rows(warehouse / "_state" / "signals", ["id", "type", "data", "connector"])
    (sent,) = [s for s in signals if s["connector"] == "afpage"]  # the refused one wrote nothing
    assert sent["id"] == sid.group(1) and sent["type"] == "execute-snapshot"
    assert json.loads(sent["data"]) == {"data-collections": ["public.items"], "type": "incremental"}
