"""Property values: Debezium's comma lists, statement lists and filter regexes, and the typing of
a property's text by its catalog type."""

from __future__ import annotations

import re
from typing import Any

from connectors.settings.catalog import PropType


# =========================================================================== value parsing
def split_list(text: str) -> list[str]:
    """Debezium's comma list: items trimmed, empty items dropped, `\\,` is a literal comma."""
    parts = re.split(r"(?<!\\),", text)
    return [p.replace("\\,", ",").strip() for p in parts if p.replace("\\,", ",").strip()]


def split_statements(text: str | None) -> list[str]:
    """`database.initial.statements` as Debezium's JdbcConnection splits it: `;` ends a
    statement, `;;` is a literal semicolon, statements are trimmed and empty ones dropped."""
    text = text or ""
    out: list[str] = []
    buf: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch != ";":
            buf.append(ch)
        elif i + 1 < n and text[i + 1] == ";":
            buf.append(";")
            i += 1
        else:
            out.append("".join(buf).strip())
            buf = []
        i += 1
    out.append("".join(buf).strip())
    return [s for s in out if s]


def compile_regex(pattern: str) -> re.Pattern[str]:
    """Compile a Debezium filter regex: case-insensitive and anchored at both ends (Debezium
    uses `Matcher.matches()`), so `.match`, `.search` and `.fullmatch` all test the whole name."""
    return re.compile(rf"\A(?:{pattern})\Z", re.IGNORECASE)


def _convert(key: str, prop_type: PropType, choices: tuple[str, ...], text: str, problems: list[str]) -> Any:
    """Typed value of `text`, or None after recording a problem."""
    if prop_type == "int":
        try:
            return int(text.strip())
        except ValueError:
            problems.append(f"{key}={text} is not an integer")
            return None
    if prop_type == "bool":
        low = text.strip().lower()
        if low in ("true", "false"):
            return low == "true"
        problems.append(f"{key}={text} is not a boolean (true or false)")
        return None
    if prop_type == "enum":
        low = text.strip().lower()
        if low in choices:
            return low
        problems.append(f"{key}={text} is not one of {', '.join(choices)}")
        return None
    if prop_type == "list":
        items = split_list(text)
        if choices:
            bad = [x for x in items if x.lower() not in choices]
            if bad:
                problems.append(f"{key}={text}: {', '.join(bad)} is not one of {', '.join(choices)}")
                return None
            return [x.lower() for x in items]
        return items
    if prop_type == "regex-list":
        items = split_list(text)
        ok = True
        for item in items:
            try:
                compile_regex(item)
            except re.error as exc:
                problems.append(f"{key}: invalid regular expression {item!r}: {exc}")
                ok = False
        return items if ok else None
    return text.strip() if prop_type == "str" else text
