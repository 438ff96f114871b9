"""The rules a commit's actions must follow, checked before the commit is written."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from deltamerge.config import TableProperties
from deltamerge.errors import AppendOnlyTableError, InvalidArgumentError
from deltamerge.log import column_mapping
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
from deltamerge.log.protocol import DOMAIN_METADATA, writer_features


def validate_actions(
    actions: Sequence[Action],
    metadata: Metadata,
    protocol: Protocol,
    read_metadata: Metadata,
    app_ids: Iterable[str] = (),
) -> None:
    """Refuse a commit whose actions break the protocol's rules before anything is written.

    ``metadata``/``protocol`` are the ones the commit will carry, ``read_metadata`` the snapshot's
    (appendOnly is judged by the table as it was read), ``app_ids`` the transaction's own txn actions.
    """
    for a in actions:
        if isinstance(a, (CommitInfo, Metadata, Protocol)):
            raise InvalidArgumentError(
                f"Do not pass {type(a).__name__} actions to commit(): commitInfo is built from the "
                "Operation, and metadata/protocol changes go through update_metadata()/update_protocol()."
            )
    adds = Counter(a.path for a in actions if isinstance(a, AddFile))
    removes = Counter(a.path for a in actions if isinstance(a, RemoveFile))
    dup = [p for p, n in (adds + removes).items() if adds[p] > 1 or removes[p] > 1]
    if dup:
        raise InvalidArgumentError(f"A commit may add or remove a path at most once; repeated: {dup[0]}")
    add_keys = {a.key for a in actions if isinstance(a, AddFile)}
    same = next((r for r in actions if isinstance(r, RemoveFile) and r.key in add_keys), None)
    if same is not None:
        raise InvalidArgumentError(
            f"A commit cannot add and remove the same logical file {same.path} (same deletion vector)."
        )
    apps = Counter(a.app_id for a in actions if isinstance(a, SetTransaction))
    apps.update(app_ids)
    if any(n > 1 for n in apps.values()):
        raise InvalidArgumentError("A commit may contain at most one txn action per appId.")
    domains = Counter(a.domain for a in actions if isinstance(a, DomainMetadata))
    if any(n > 1 for n in domains.values()):
        raise InvalidArgumentError("A commit may contain at most one domainMetadata action per domain.")
    if domains and DOMAIN_METADATA not in writer_features(protocol):
        raise InvalidArgumentError(
            "domainMetadata actions require the 'domainMetadata' writer feature in the table protocol."
        )
    mapped = column_mapping.is_mapped(metadata.schema) if metadata.partition_columns else False
    keys = [column_mapping.partition_key(metadata.schema, c, mapped) for c in metadata.partition_columns]
    for a in actions:
        if isinstance(a, AddFile):
            pairs = zip(metadata.partition_columns, keys, strict=True)
            absent = [c for c, k in pairs if k not in a.partition_values]
            if absent:
                raise InvalidArgumentError(
                    f"add {a.path} has no partition value for {absent}; every partition column needs an "
                    "entry in partitionValues (None for null)."
                )
    if TableProperties.APPEND_ONLY.get(read_metadata.configuration):
        bad = next((a for a in actions if isinstance(a, RemoveFile) and a.data_change), None)
        if bad is not None:
            raise AppendOnlyTableError(
                "This table is configured to only allow appends (delta.appendOnly=true), so this "
                f"operation cannot delete or update data (it removes {bad.path}). To allow it, set "
                "'delta.appendOnly' to 'false' with ALTER TABLE ... SET TBLPROPERTIES."
            )
