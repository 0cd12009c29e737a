"""The per-change step of a source with the options that change it applied once, at start, so
the default path has no extra test per row:

- `skip.messages.without.change`: an update whose captured columns (after masks and truncation)
  did not change is dropped, as Debezium does;
- `event.processing.failure.handling.mode` warn/skip (`ignore` is skip's old name): a change
  whose values cannot be converted is left out — its records removed again, none counted yet,
  since values are converted before the transaction counters move — and logged per the mode.

A step is `step(out, *args)` appending the change's records to `out`; both sources build theirs
with `with_options` and keep it as an instance attribute.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from connectors.api import TidemarkError
from connectors.format.tableschema import failure_mode, skipped_failed_event
from connectors.settings.model import SourceSettings

Step = Callable[..., None]


def with_options(
    step: Step, s: SourceSettings, *, unchanged: Callable[..., bool], where: Callable[..., str]
) -> Step:
    """`step` as the settings want it. `unchanged(out, *args)` says whether a change is an update
    that changed nothing; `where(out, *args)` names the change in a log line (never its values)."""
    if s.skip_messages_without_change:
        step = _unless_unchanged(step, unchanged)
    mode = failure_mode(s)
    if mode != "fail":
        step = _tolerating_failures(step, mode, where)
    return step


def _unless_unchanged(step: Step, unchanged: Callable[..., bool]) -> Step:
    def skip_unchanged(out: list[Any], *args: Any) -> None:
        if not unchanged(out, *args):
            step(out, *args)

    return skip_unchanged


def _tolerating_failures(step: Step, mode: str, where: Callable[..., str]) -> Step:
    def tolerant(out: list[Any], *args: Any) -> None:
        n = len(out)
        try:
            step(out, *args)
        except TidemarkError:
            raise
        except Exception as exc:  # noqa: BLE001 - the mode says what to do with any conversion failure
            del out[n:]
            skipped_failed_event(mode, exc, where(out, *args))

    return tolerant
