"""Durable state in Delta tables (offsets; schema history and signals live beside them)."""

from connectors.state.offsets import DeltaOffsetStore

__all__ = ["DeltaOffsetStore"]
