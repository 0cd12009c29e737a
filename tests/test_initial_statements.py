"""`database.initial.statements`: run on every new non-replication connection, as Debezium's JDBC
connections do (checked against Debezium 3.6: its PostgreSQL connector runs them on each
"Debezium General"/"Debezium Slot Info" connection, never on the walsender). The statements may
hold secrets: they are never logged or shown, only counted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cdc import run_cli
from cfgutil import source as settings_of
from mycdc import write_config as my_config
from pgcdc import write_config as pg_config

from connectors.api import TerminalError
from connectors.settings.config import load
from connectors.settings.values import split_statements
from connectors.sources.mysql import setup as my_setup
from connectors.sources.postgres import connection as pg_connection

SECRET = "tm-very-secret-41"


def test_split_like_debezium() -> None:
    assert split_statements("SET a = 1; SELECT 2") == ["SET a = 1", "SELECT 2"]
    # ';;' is a literal semicolon, a final ';' ends the last statement, blanks are dropped
    assert split_statements("SELECT 'a;;b';; ;SET x = 1;") == ["SELECT 'a;b';", "SET x = 1"]
    assert split_statements(" ; ;") == [] and split_statements(None) == [] and split_statements(";;") == [";"]


# --------------------------------------------------------------------------- PostgreSQL
def test_pg_statements_run_on_each_new_connection(
    pg: Any, pg_database: str, caplog: pytest.LogCaptureFixture
) -> None:
    props = pg.props(
        **{
            "database.dbname": pg_database,
            "database.initial.statements": f"SELECT set_config('tidemark.probe', 'a;;{SECRET}', false);SET search_path TO pg_catalog",
        }
    )
    params = pg_connection.PgConnParams.from_settings(settings_of("postgres", props))
    assert SECRET not in repr(params)
    with caplog.at_level("INFO", logger="connectors.sources.postgres.connection"):
        conn = pg_connection.connect(params)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT current_setting('tidemark.probe'), current_setting('search_path')")
            assert cur.fetchone() == (f"a;{SECRET}", "pg_catalog")
    finally:
        conn.close()
    assert "ran 2 database.initial.statements" in caplog.text and SECRET not in caplog.text


def test_pg_failing_statement_is_one_clear_error_without_its_text(pg: Any, pg_database: str) -> None:
    props = pg.props(
        **{
            "database.dbname": pg_database,
            "database.initial.statements": f"SET search_path TO public; SELEC '{SECRET}'",
        }
    )
    with pytest.raises(TerminalError) as err:
        pg_connection.connect(pg_connection.PgConnParams.from_settings(settings_of("postgres", props)))
    text = str(err.value)
    assert "database.initial.statements: statement 2 of 2 failed" in text
    assert "SQLSTATE 42601 (syntax_error)" in text and SECRET not in text


def test_pg_connector_runs_them_but_not_on_the_replication_connection(
    pg: Any, pg_database: str, unique_name: Any, tmp_path: Path
) -> None:
    """The whole CLI run: every connection but the walsender logs itself into a table."""
    pg.execute("CREATE TABLE init_log (pid int, backend text, note text)", dbname=pg_database)
    pg.execute("CREATE TABLE t (id int PRIMARY KEY)", dbname=pg_database)
    stmts = (
        "INSERT INTO init_log SELECT pg_backend_pid(), backend_type, 'x;;y' FROM pg_stat_activity "
        f"WHERE pid = pg_backend_pid(); SET application_name = '{SECRET}'"
    )
    cfg = pg_config(
        tmp_path / "c.properties",
        pg,
        slot=unique_name("slot"),
        dbname=pg_database,
        jsonl=tmp_path / "out.jsonl",
        database__initial__statements=stmts,
    )
    proc = run_cli("run", "--config", str(cfg), "--until-caught-up")
    rows = pg.query("SELECT backend, note FROM init_log", dbname=pg_database)
    assert rows and {r[0] for r in rows} == {"client backend"} and {r[1] for r in rows} == {"x;y"}
    assert "ran 2 database.initial.statements" in proc.stderr and SECRET not in proc.stderr
    # masked wherever the configuration is shown
    redacted = load(cfg).origin.redacted()
    assert redacted["debezium.source.database.initial.statements"] == "********"


# --------------------------------------------------------------------------- MySQL / MariaDB
def test_mysql_statements_run_on_the_setup_connection(mariadb: Any, caplog: pytest.LogCaptureFixture) -> None:
    props = mariadb.props(**{"database.initial.statements": f"SET @probe = 'a;;{SECRET}'; SET @n = 7;"})
    settings = my_setup.connection_settings(settings_of("mariadb", props))
    assert SECRET not in repr(settings)
    with caplog.at_level("INFO", logger="connectors.sources.mysql.setup"):
        conn = my_setup.connect(settings)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT @probe, @n")
            assert cur.fetchone() == (f"a;{SECRET}", 7)
    finally:
        conn.close()
    assert "ran 2 database.initial.statements" in caplog.text and SECRET not in caplog.text


def test_mysql_failing_statement_is_one_clear_error(mariadb: Any) -> None:
    props = mariadb.props(**{"database.initial.statements": f"SELEC '{SECRET}'"})
    with pytest.raises(TerminalError) as err:
        my_setup.connect(my_setup.connection_settings(settings_of("mariadb", props)))
    text = str(err.value)
    assert "database.initial.statements: statement 1 of 1 failed" in text and "server error 1064" in text
    assert SECRET not in text


def test_mysql_connector_runs_them(
    mariadb: Any, mariadb_database: str, unique_name: Any, tmp_path: Path
) -> None:
    mariadb.execute(f"CREATE TABLE {mariadb_database}.init_log (conn bigint, note text)")
    stmts = f"INSERT INTO {mariadb_database}.init_log VALUES (CONNECTION_ID(), 'x;;y')"
    cfg = my_config(
        tmp_path / "c.properties",
        mariadb,
        server_id=unique_name.server_id(),
        db=mariadb_database,
        jsonl=tmp_path / "out.jsonl",
        database__initial__statements=stmts,
    )
    proc = run_cli("run", "--config", str(cfg), "--until-caught-up")
    rows = mariadb.query(f"SELECT note FROM {mariadb_database}.init_log")
    assert rows and {r[0] for r in rows} == {"x;y"}
    assert "ran 1 database.initial.statements" in proc.stderr
