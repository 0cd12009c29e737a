"""What the MySQL source and the set-binlog-position action (`signals/binlog_position.py`) share:
the offset key that says which signal last moved the stream, and the ticket of a move handed to the
running source (`MySqlSource.reposition`)."""

from __future__ import annotations

import threading
from typing import Any

MARK = "set_binlog_position"  # offset key: the key of the last set-binlog-position signal applied


class RepositionTicket:
    """A reposition handed to a source: `taken` is set when the source moved its stream."""

    def __init__(self, offset: dict[str, Any], key: str) -> None:
        self.offset, self.key = offset, key
        self.taken = threading.Event()
