"""Kafka Connect schemas and their JSON-converter form.

A `Schema` is immutable and built once per table version, so its JSON text is computed once
(`json_text`) and spliced into every record's `{"schema": ..., "payload": ...}`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import orjson

_NO_DEFAULT: Any = object()


@dataclass(frozen=True, eq=False)
class Field:
    name: str
    schema: "Schema"


@dataclass(frozen=True, eq=False)
class Schema:
    """A Connect schema. `type` is the JSON converter's lower-case type name."""

    type: str
    optional: bool = False
    name: str | None = None
    version: int | None = None
    parameters: dict[str, str] | None = None
    default: Any = _NO_DEFAULT
    fields: tuple[Field, ...] = ()
    items: "Schema | None" = None
    keys: "Schema | None" = None
    values: "Schema | None" = None
    doc: str | None = None
    _extra: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def to_json(self) -> dict[str, Any]:
        """The JsonConverter's schema object (org.apache.kafka.connect.json.JsonConverter#asJsonSchema)."""
        out: dict[str, Any] = {"type": self.type}
        if self.type == "struct":
            out["fields"] = [dict(f.schema.to_json(), field=f.name) for f in self.fields]
        elif self.type == "array" and self.items is not None:
            out["items"] = self.items.to_json()
        elif self.type == "map" and self.keys is not None and self.values is not None:
            out["keys"] = self.keys.to_json()
            out["values"] = self.values.to_json()
        out["optional"] = self.optional
        if self.name is not None:
            out["name"] = self.name
        if self.version is not None:
            out["version"] = self.version
        if self.doc is not None:
            out["doc"] = self.doc
        if self.parameters:
            out["parameters"] = dict(self.parameters)
        if self.default is not _NO_DEFAULT and self.default is not None:
            out["default"] = self.default
        return out

    @cached_property
    def json_text(self) -> bytes:
        return orjson.dumps(self.to_json())

    def field(self, name: str) -> Field | None:
        for f in self.fields:
            if f.name == name:
                return f
        return None

    def with_optional(self, optional: bool) -> "Schema":
        if optional == self.optional:
            return self
        return Schema(
            self.type,
            optional,
            self.name,
            self.version,
            self.parameters,
            self.default,
            self.fields,
            self.items,
            self.keys,
            self.values,
            self.doc,
        )

    def with_default(self, default: Any) -> "Schema":
        return Schema(
            self.type,
            self.optional,
            self.name,
            self.version,
            self.parameters,
            default,
            self.fields,
            self.items,
            self.keys,
            self.values,
            self.doc,
        )

    def with_parameters(self, extra: dict[str, str]) -> "Schema":
        params = dict(self.parameters or {})
        params.update(extra)
        return Schema(
            self.type,
            self.optional,
            self.name,
            self.version,
            params,
            self.default,
            self.fields,
            self.items,
            self.keys,
            self.values,
            self.doc,
        )


NO_DEFAULT = _NO_DEFAULT


def struct(
    name: str | None,
    fields: list[tuple[str, Schema]],
    optional: bool = False,
    version: int | None = None,
    doc: str | None = None,
) -> Schema:
    return Schema(
        "struct", optional, name, version, None, _NO_DEFAULT, tuple(Field(n, s) for n, s in fields), doc=doc
    )


def prim(
    type_: str,
    optional: bool = False,
    name: str | None = None,
    version: int | None = None,
    parameters: dict[str, str] | None = None,
    default: Any = _NO_DEFAULT,
) -> Schema:
    return Schema(type_, optional, name, version, parameters, default)
