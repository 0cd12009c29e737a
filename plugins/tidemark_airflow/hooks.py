"""An Airflow Connection (Postgres or MySQL type) as connector properties.

A connector file names the Connection with `tidemark.airflow.connection.id`; when a task runs,
the Connection's host, port, login, password and schema (PostgreSQL: the database) become
`database.hostname`, `database.port`, `database.user`, `database.password` and `database.dbname`,
replacing what the file says for those keys. The Connection's extra may carry more connector
properties under `tidemark` (`{"tidemark": {"database.sslmode": "require"}}`).

The password is registered with Airflow's secrets masker (so it is replaced by `***` in every
task log line), and `__repr__`/`redacted()` never show it; it is handed to the connector only in
the private runtime file (`config.runtime_config`).
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseHook

POSTGRES_TYPES = ("postgres", "postgresql")
MYSQL_TYPES = ("mysql", "mariadb")


class TidemarkConnectionHook(BaseHook):
    conn_name_attr = "tidemark_conn_id"
    default_conn_name = "tidemark_default"
    conn_type = "tidemark"
    hook_name = "Tidemark connector"

    def __init__(self, conn_id: str) -> None:
        super().__init__()
        self.conn_id = conn_id

    def __repr__(self) -> str:
        return f"TidemarkConnectionHook(conn_id={self.conn_id!r})"

    def connector_properties(self, connector_class: str = "") -> dict[str, str]:
        """Connector properties (plain names) from the Connection. `connector_class`: the file's
        `connector.class`, to refuse a Connection of the other database's type."""
        conn = self.get_connection(self.conn_id)
        return connection_properties(conn, connector_class, self.conn_id)

    def redacted(self, connector_class: str = "") -> dict[str, str]:
        return {
            k: ("********" if k.endswith("password") and v else v)
            for k, v in self.connector_properties(connector_class).items()
        }


def connection_properties(conn: Any, connector_class: str, conn_id: str) -> dict[str, str]:
    from airflow.sdk.log import mask_secret

    from connectors.api import ConfigError

    ctype = (conn.conn_type or "").lower()
    cls = connector_class.lower()
    want_pg = "postgres" in cls
    if ctype not in POSTGRES_TYPES + MYSQL_TYPES:
        raise ConfigError(
            f"Airflow Connection {conn_id!r} is of type {conn.conn_type!r}",
            "tidemark.airflow.connection.id must name a Postgres or MySQL connection",
        )
    if cls and (ctype in POSTGRES_TYPES) != want_pg:
        raise ConfigError(
            f"Airflow Connection {conn_id!r} is of type {conn.conn_type!r} but connector.class is {connector_class}",
            "name a connection of the connector's database type in tidemark.airflow.connection.id",
        )
    props: dict[str, str] = {}
    if conn.host:
        props["database.hostname"] = str(conn.host)
    if conn.port:
        props["database.port"] = str(conn.port)
    if conn.login:
        props["database.user"] = str(conn.login)
    if conn.password:
        mask_secret(conn.password)
        props["database.password"] = str(conn.password)
    if conn.schema and ctype in POSTGRES_TYPES:
        props["database.dbname"] = str(conn.schema)
    extra = conn.extra_dejson.get("tidemark") if conn.extra else None
    if isinstance(extra, dict):
        for k, v in extra.items():
            if "password" in str(k).lower() or "secret" in str(k).lower():
                mask_secret(str(v))
            props[str(k)] = str(v)
    return props
