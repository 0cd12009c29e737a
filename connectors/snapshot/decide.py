"""What a start does about snapshots, from `snapshot.mode` and what is stored — Debezium's
`Snapshotter` decisions, one function.

Inputs: the mode's settings; whether an offset is stored (`has_offset`); whether streaming can
resume from it (`resumable`: the slot / binlog position still exists); the newest snapshot in
`_state/snapshots` (`state`): an unfinished one is resumed, whatever the mode (except
no_data/never, which never read data).
"""

from __future__ import annotations

from dataclasses import dataclass

from connectors.snapshot.progress import SnapshotState


@dataclass(frozen=True, slots=True)
class Decision:
    snapshot: bool  # read table data now
    resume: bool  # continue the unfinished snapshot in `_state/snapshots`
    stream: bool  # stream after the snapshot (or at once)
    reset_offsets: bool  # the stored offset is stale: streaming starts at the snapshot's position
    reason: str  # one line for the log


def decide(
    mode: str,
    *,
    has_offset: bool,
    resumable: bool,
    state: SnapshotState | None,
    configuration_based: tuple[bool, bool, bool] = (False, False, False),
) -> Decision:
    """`configuration_based`: (snapshot.data, start.stream, snapshot.on.data.error) flags."""
    unfinished = state is not None and not state.completed
    done_before = has_offset or (state is not None and state.completed)
    if mode in ("no_data", "never"):
        return Decision(False, False, True, False, f"snapshot.mode={mode}: no data snapshot")
    if unfinished:
        stream = mode != "initial_only" and not (mode == "configuration_based" and not configuration_based[1])
        return Decision(True, True, stream, False, "resuming the unfinished snapshot")
    if mode == "initial":
        if done_before:
            return Decision(False, False, True, False, "snapshot.mode=initial: offsets exist, no snapshot")
        return Decision(True, False, True, False, "snapshot.mode=initial: no offsets yet, snapshotting")
    if mode == "initial_only":
        if done_before:
            return Decision(False, False, False, False, "snapshot.mode=initial_only: already snapshotted")
        return Decision(True, False, False, False, "snapshot.mode=initial_only: snapshotting, then stopping")
    if mode == "always":
        return Decision(True, False, True, has_offset and not resumable, "snapshot.mode=always: snapshotting")
    if mode == "when_needed":
        if not done_before:
            return Decision(True, False, True, False, "snapshot.mode=when_needed: no offsets, snapshotting")
        if not resumable:
            return Decision(
                True,
                False,
                True,
                True,
                "snapshot.mode=when_needed: the stored position is gone, re-snapshotting",
            )
        return Decision(
            False, False, True, False, "snapshot.mode=when_needed: streaming resumes, no snapshot"
        )
    if mode == "configuration_based":
        data, stream, on_error = configuration_based
        lost = has_offset and not resumable
        # As Debezium's ConfigurationBasedSnapshotter: snapshot.data=true reads data at every start.
        want = data or (on_error and lost)
        return Decision(
            want,
            False,
            stream,
            want and lost,
            f"snapshot.mode=configuration_based: data={want}, stream={stream}",
        )
    raise ValueError(f"snapshot.mode={mode} has no snapshot decision")
