"""Logical conflict detection between a transaction and the commits that won the race.

When ``readVersion + 1`` is taken, every winning commit is checked in version order against what
this transaction read and wrote (delta-spark ``ConflictChecker``, protocol.md §4.3):

1. winner changed the protocol                    -> :class:`ProtocolChangedError`
2. winner changed the metadata                    -> :class:`MetadataChangedError`
3. both wrote the same metadata domain            -> :class:`ConcurrentTransactionError`
4. winner wrote a ``txn`` for an appId we read    -> :class:`ConcurrentTransactionError`
5. winner added files our reads would have seen   -> :class:`ConcurrentAppendError`
   (WriteSerializable ignores the winner's blind appends unless we change metadata;
   SnapshotIsolation skips this check)
6. winner removed a file we read                  -> :class:`ConcurrentDeleteReadError`
7. winner removed a file we also remove           -> :class:`ConcurrentDeleteDeleteError`

If nothing conflicts, the transaction simply retries at the next version.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from deltamerge.errors import (
    ConcurrentAppendError,
    ConcurrentDeleteDeleteError,
    ConcurrentDeleteReadError,
    ConcurrentTransactionError,
    MetadataChangedError,
    ProtocolChangedError,
)
from deltamerge.log.actions import (
    Action,
    AddFile,
    CommitInfo,
    DomainMetadata,
    Metadata,
    Protocol,
    RemoveFile,
    SetTransaction,
)

SERIALIZABLE = "Serializable"
WRITE_SERIALIZABLE = "WriteSerializable"
SNAPSHOT_ISOLATION = "SnapshotIsolation"
ISOLATION_LEVELS = (SERIALIZABLE, WRITE_SERIALIZABLE, SNAPSHOT_ISOLATION)

_RETRY = "Refresh the table and retry the operation."


@dataclass(frozen=True)
class ReadPredicate:
    """A filter the transaction used to select files; ``may_match`` says whether a file could match."""

    may_match: Callable[[AddFile], bool]
    description: str


@dataclass(frozen=True)
class TransactionInfo:
    """What the current transaction read and what it is about to write."""

    read_version: int
    isolation_level: str
    read_predicates: tuple[ReadPredicate, ...] = ()
    read_file_paths: frozenset[str] = frozenset()
    read_whole_table: bool = False
    read_app_ids: frozenset[str] = frozenset()
    metadata_changed: bool = False
    protocol_changed: bool = False
    removed_paths: frozenset[str] = frozenset()
    domains: frozenset[str] = frozenset()


@dataclass(frozen=True)
class WinningCommit:
    """A commit that landed between our read version and our attempt."""

    version: int
    actions: tuple[Action, ...] = field(repr=False)

    @cached_property
    def commit_info(self) -> CommitInfo | None:
        """The winner's ``commitInfo`` if it wrote one."""
        return next((a for a in self.actions if isinstance(a, CommitInfo)), None)

    @property
    def operation(self) -> str:
        """The winner's operation name (``UNKNOWN`` without commitInfo)."""
        info = self.commit_info
        return (info.operation if info is not None else None) or "UNKNOWN"

    @property
    def is_blind_append(self) -> bool:
        """Only an explicit ``isBlindAppend=true`` counts (a missing flag means not blind)."""
        return self.commit_info is not None and self.commit_info.is_blind_append

    @cached_property
    def added_files(self) -> tuple[AddFile, ...]:
        """Every ``add`` of the winner (including ``dataChange=false`` ones, as delta-spark does)."""
        return tuple(a for a in self.actions if isinstance(a, AddFile))

    @cached_property
    def removed_files(self) -> tuple[RemoveFile, ...]:
        """Every ``remove`` of the winner."""
        return tuple(a for a in self.actions if isinstance(a, RemoveFile))

    @property
    def changes_metadata(self) -> bool:
        """Whether the winner wrote a ``metaData`` action."""
        return any(isinstance(a, Metadata) for a in self.actions)

    @property
    def changes_protocol(self) -> bool:
        """Whether the winner wrote a ``protocol`` action."""
        return any(isinstance(a, Protocol) for a in self.actions)

    @property
    def app_ids(self) -> frozenset[str]:
        """appIds of the winner's ``txn`` actions."""
        return frozenset(a.app_id for a in self.actions if isinstance(a, SetTransaction))

    @property
    def domains(self) -> frozenset[str]:
        """Metadata domains the winner wrote."""
        return frozenset(a.domain for a in self.actions if isinstance(a, DomainMetadata))

    def describe(self) -> str:
        """``"MERGE (version 7)"``, for error messages."""
        return f"{self.operation} (version {self.version})"


def _partition_text(add: AddFile) -> str:
    if not add.partition_values:
        return "the table"
    return "partition " + json.dumps(add.partition_values, sort_keys=True)


def _check_protocol(txn: TransactionInfo, winner: WinningCommit) -> None:
    if not winner.changes_protocol:
        return
    extra = ""
    if txn.read_version < 0:
        extra = (
            " This happens when several writers create the same table at once; create the table "
            "before writing to it concurrently."
        )
    raise ProtocolChangedError(
        f"The protocol version of the Delta table has been changed by a concurrent {winner.describe()}."
        f"{extra} {_RETRY}"
    )


def _check_metadata(txn: TransactionInfo, winner: WinningCommit) -> None:
    if not winner.changes_metadata:
        return
    extra = (
        " This happens when several writers create the same table at once." if txn.read_version < 0 else ""
    )
    raise MetadataChangedError(
        f"The metadata of the Delta table has been changed by a concurrent {winner.describe()} "
        f"(schema, partitioning or table properties).{extra} {_RETRY}"
    )


def _check_domains(txn: TransactionInfo, winner: WinningCommit) -> None:
    both = sorted(txn.domains & winner.domains)
    if both:
        raise ConcurrentTransactionError(
            f"A concurrent {winner.describe()} changed the metadata domain '{both[0]}' that this "
            f"transaction also changes. {_RETRY}"
        )


def _check_app_ids(txn: TransactionInfo, winner: WinningCommit) -> None:
    both = sorted(txn.read_app_ids & winner.app_ids)
    if both:
        raise ConcurrentTransactionError(
            f"A concurrent {winner.describe()} committed a transaction for application id '{both[0]}', "
            "whose last committed version this transaction read. Two writers are using the same "
            "application id (txnAppId): re-read the application's version and retry, or skip the batch "
            "if it was already committed."
        )


def _check_appends(txn: TransactionInfo, winner: WinningCommit) -> None:
    if txn.isolation_level == SNAPSHOT_ISOLATION:
        return
    added: Sequence[AddFile] = winner.added_files
    if winner.is_blind_append and txn.isolation_level == WRITE_SERIALIZABLE and not txn.metadata_changed:
        added = ()  # WriteSerializable may order a blind append after us
    if not added:
        return
    # Without predicates, anything read means the whole table was read (e.g. unpartitioned tables).
    whole = txn.read_whole_table or (not txn.read_predicates and bool(txn.read_file_paths))
    for add in added:
        if whole:
            hit: str | None = "the whole table"
        else:
            hit = next((p.description for p in txn.read_predicates if p.may_match(add)), None)
        if hit is not None:
            raise ConcurrentAppendError(
                f"Files were added to {_partition_text(add)} by a concurrent {winner.describe()} "
                f"(for example {add.path}) that this transaction's read of {hit} would have seen. {_RETRY} "
                "If this keeps happening, make the operation's condition select disjoint partitions."
            )


def _check_delete_read(txn: TransactionInfo, winner: WinningCommit) -> None:
    removed = winner.removed_files
    hit = next((r for r in removed if r.path in txn.read_file_paths), None)
    if hit is None and removed and txn.read_whole_table:
        hit = removed[0]
    if hit is not None:
        raise ConcurrentDeleteReadError(
            f"This transaction read the file {hit.path}, which a concurrent {winner.describe()} removed "
            f"(deleted or rewrote). {_RETRY}"
        )


def _check_delete_delete(txn: TransactionInfo, winner: WinningCommit) -> None:
    hit = next((r for r in winner.removed_files if r.path in txn.removed_paths), None)
    if hit is not None:
        raise ConcurrentDeleteDeleteError(
            f"This transaction tried to remove the file {hit.path}, which a concurrent {winner.describe()} "
            f"already removed. {_RETRY}"
        )


CHECKS: tuple[Callable[[TransactionInfo, WinningCommit], None], ...] = (
    _check_protocol,
    _check_metadata,
    _check_domains,
    _check_app_ids,
    _check_appends,
    _check_delete_read,
    _check_delete_delete,
)


def check_conflicts(txn: TransactionInfo, winner: WinningCommit) -> None:
    """Raise the first :class:`ConcurrentModificationError` that ``winner`` causes for ``txn``."""
    for check in CHECKS:
        check(txn, winner)
