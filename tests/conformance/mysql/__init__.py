"""The MySQL/MariaDB conformance workload (schema and steps)."""
