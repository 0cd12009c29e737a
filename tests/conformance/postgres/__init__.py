"""The PostgreSQL conformance workloads (schemas and steps)."""
