"""Names of the files in ``_delta_log`` (PROTOCOL.md "Delta Log Entries" and "Checkpoints").

- commits: ``00000000000000000007.json``
- classic checkpoints: ``00000000000000000010.checkpoint.parquet``
- multi-part checkpoints (deprecated, read only):
  ``00000000000000000010.checkpoint.0000000001.0000000003.parquet``
- V2 (UUID-named) checkpoints: ``00000000000000000010.checkpoint.<uuid>.json|parquet``
- version checksums ``n.crc`` and log compactions ``x.y.compacted.json`` are recognised and ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

LAST_CHECKPOINT = "_last_checkpoint"
SIDECAR_DIR = "_sidecars"

COMMIT = "commit"
CHECKPOINT = "checkpoint"
CRC = "crc"
COMPACTION = "compaction"

_COMMIT_RE = re.compile(r"^(\d{20})\.json$")
_CLASSIC_RE = re.compile(r"^(\d{20})\.checkpoint\.parquet$")
_MULTIPART_RE = re.compile(r"^(\d{20})\.checkpoint\.(\d{10})\.(\d{10})\.parquet$")
_V2_RE = re.compile(
    r"^(\d{20})\.checkpoint\.([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})"
    r"\.(json|parquet)$"
)
_CRC_RE = re.compile(r"^(\d{20})\.crc$")
_COMPACTION_RE = re.compile(r"^(\d{20})\.(\d{20})\.compacted\.json$")


def version_prefix(version: int) -> str:
    """The zero-padded 20-digit version that starts every versioned file name."""
    if version < 0:
        raise ValueError(f"negative version {version}")
    return f"{version:020d}"


def commit_name(version: int) -> str:
    """``%020d.json``."""
    return f"{version_prefix(version)}.json"


def checkpoint_name(version: int) -> str:
    """Classic single-file checkpoint name."""
    return f"{version_prefix(version)}.checkpoint.parquet"


def multipart_checkpoint_names(version: int, num_parts: int) -> list[str]:
    """All part names of a multi-part checkpoint (parts are 1-based)."""
    prefix = version_prefix(version)
    return [f"{prefix}.checkpoint.{i:010d}.{num_parts:010d}.parquet" for i in range(1, num_parts + 1)]


def v2_checkpoint_name(version: int, checkpoint_uuid: str, fmt: str = "parquet") -> str:
    """UUID-named (V2) checkpoint name."""
    return f"{version_prefix(version)}.checkpoint.{checkpoint_uuid}.{fmt}"


@dataclass(frozen=True)
class LogFileName:
    """A parsed ``_delta_log`` file name."""

    name: str
    version: int
    kind: str  # COMMIT, CHECKPOINT, CRC or COMPACTION
    part: int | None = None  # multi-part checkpoint: 1-based part number
    num_parts: int | None = None  # multi-part checkpoint: total parts
    uuid: str | None = None  # V2 checkpoint
    fmt: str | None = None  # V2 checkpoint: "json" or "parquet"
    end_version: int | None = None  # log compaction

    @property
    def is_commit(self) -> bool:
        """A ``n.json`` commit."""
        return self.kind == COMMIT

    @property
    def is_checkpoint(self) -> bool:
        """Any checkpoint file (classic, part, or V2)."""
        return self.kind == CHECKPOINT

    @property
    def is_multipart(self) -> bool:
        """One part of a multi-part checkpoint."""
        return self.num_parts is not None

    @property
    def is_v2(self) -> bool:
        """A UUID-named V2 checkpoint."""
        return self.uuid is not None


def parse_log_file_name(name: str) -> LogFileName | None:
    """Parse a log file name (a bare name or a path ending in one); ``None`` if not a log file."""
    base = name.rsplit("/", 1)[-1]
    if m := _COMMIT_RE.match(base):
        return LogFileName(base, int(m.group(1)), COMMIT)
    if m := _CLASSIC_RE.match(base):
        return LogFileName(base, int(m.group(1)), CHECKPOINT)
    if m := _MULTIPART_RE.match(base):
        return LogFileName(base, int(m.group(1)), CHECKPOINT, part=int(m.group(2)), num_parts=int(m.group(3)))
    if m := _V2_RE.match(base):
        return LogFileName(base, int(m.group(1)), CHECKPOINT, uuid=m.group(2), fmt=m.group(3))
    if m := _CRC_RE.match(base):
        return LogFileName(base, int(m.group(1)), CRC)
    if m := _COMPACTION_RE.match(base):
        return LogFileName(base, int(m.group(1)), COMPACTION, end_version=int(m.group(2)))
    return None


def commit_version(name: str) -> int | None:
    """The version of a commit file name, else ``None``."""
    m = _COMMIT_RE.match(name.rsplit("/", 1)[-1])
    return int(m.group(1)) if m else None
