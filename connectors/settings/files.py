"""Configuration file formats: Java `.properties` (as `java.util.Properties.load` reads them) and
YAML (flattened to dotted keys), both to one flat `key → text` mapping."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from connectors.api import ConfigError

# =========================================================================== file formats
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "\\" or i + 1 >= len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u" and re.fullmatch(r"[0-9A-Fa-f]{4}", text[i + 2 : i + 6]):
            out.append(chr(int(text[i + 2 : i + 6], 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


def _trailing_backslashes(line: str) -> int:
    return len(line) - len(line.rstrip("\\"))


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java `.properties` text like `java.util.Properties.load`: `#`/`!` comment lines,
    `key=value`, `key: value` and `key value`, trailing-backslash line continuation, and the
    escapes `\\t \\n \\r \\f \\uXXXX \\<char>`. A repeated key keeps the last value."""
    out: dict[str, str] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].lstrip(" \t\f")
        i += 1
        if not line or line[0] in "#!":
            continue
        while _trailing_backslashes(line) % 2 == 1:
            line = line[:-1]
            if i >= len(lines):
                break
            line += lines[i].lstrip(" \t\f")
            i += 1
        # key ends at the first unescaped '=', ':' or whitespace
        j = 0
        while j < len(line):
            ch = line[j]
            if ch == "\\":
                j += 2
                continue
            if ch in "=: \t\f":
                break
            j += 1
        key, rest = line[:j], line[j:]
        rest = rest.lstrip(" \t\f")
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(" \t\f")
        out[_unescape(key)] = _unescape(rest)
    return out


def _scalar_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def flatten_yaml(data: Any, prefix: str = "") -> dict[str, str]:
    """Flatten nested mappings to dotted keys; lists become comma-joined text, booleans
    `true`/`false`, null the empty string."""
    out: dict[str, str] = {}
    if not isinstance(data, Mapping):
        if prefix:
            out[prefix] = _scalar_text(data)
            return out
        raise ConfigError("a YAML configuration must be a mapping of property names to values")
    for k, v in data.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, Mapping):
            out.update(flatten_yaml(v, key))
        elif isinstance(v, list | tuple):
            out[key] = ",".join(_scalar_text(x) for x in v)
        else:
            out[key] = _scalar_text(v)
    return out


def _read(path: Path) -> dict[str, str]:
    is_yaml = path.suffix.lower() in (".yaml", ".yml")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(
            f"cannot read configuration file {path}: {exc.strerror or exc}",
            "check the path given with --config",
        ) from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        if is_yaml:
            raise ConfigError(
                f"{path}: not UTF-8 text (byte {exc.start})", "save the file as UTF-8"
            ) from None
        # Java reads .properties files as ISO-8859-1 (Properties.load(InputStream)); UTF-8 is
        # tried first because that is what most editors write today.
        text = data.decode("latin-1")
    if is_yaml:
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: not valid YAML: {exc}") from None
        return flatten_yaml(data or {})
    return parse_properties(text)
