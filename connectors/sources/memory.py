"""What earlier connection attempts of this run learned, kept per loaded configuration.

The engine builds a new source for every attempt (a reconnect after a server restart), so a
source cannot remember anything itself. Both sources keep here: whether the server was reached
once — after that, "connection refused" means a restart in progress (retried with backoff),
before it a wrong host or port (one clear error at the first start) — and which start-up
warnings were given (once per run, not per reconnect).
"""

from __future__ import annotations

import weakref
from collections.abc import Hashable
from dataclasses import dataclass, field

from connectors.settings.config import ConnectorConfig


@dataclass
class RunMemory:
    connected: bool = False
    warned: set[Hashable] = field(default_factory=set)
    # PostgreSQL: the highest position the server reported to this process on the slot (commit
    # ends and keepalive positions). The slot follows keepalives once everything is confirmed
    # (replication.py), so after a server restart a slot up to here is our own doing, not a gap.
    seen_position: int = 0

    def first_time(self, warning: Hashable) -> bool:
        """True the first time `warning` is asked for in this run (then it is remembered)."""
        if warning in self.warned:
            return False
        self.warned.add(warning)
        return True


# ConnectorConfig hashes by identity (eq=False): the CLI builds every attempt's source from the
# same loaded object, and a new load is a new run.
_MEMORIES: weakref.WeakKeyDictionary[ConnectorConfig, RunMemory] = weakref.WeakKeyDictionary()


def memory_for(cfg: ConnectorConfig) -> RunMemory:
    return _MEMORIES.setdefault(cfg, RunMemory())
