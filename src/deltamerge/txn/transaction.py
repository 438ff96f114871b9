"""Optimistic transactions: read a snapshot, stage actions, commit with put-if-absent.

::

    snapshot(r) ──> record reads ──> commit(actions, operation)
                                        │ check_can_write, appendOnly, action rules
                                        │ [commitInfo, protocol?, metaData?, txn*, actions*]
                                        ▼
                     write_exclusive(r+1.json) ── ok ──> post-commit (checkpoint every N)
                                        │ FileExistsError
                                        ▼
                     check_conflicts(each winner r+1..latest) ── conflict ──> Concurrent*Error
                                        │ none
                                        └──> retry at latest+1 (same actions, same readVersion;
                                             commitInfo rebuilt: in-commit timestamps follow the winner)
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from deltamerge.config import SessionConf, TableProperties
from deltamerge.errors import (
    CommitError,
    InvalidArgumentError,
    MaxCommitAttemptsError,
    PostCommitHookError,
    TableNotFoundError,
    UnsupportedOperationError,
)
from deltamerge.log import char_varchar, cleanup, clustering, column_mapping, filenames, paths
from deltamerge.log.actions import (
    Action,
    AddCDCFile,
    AddFile,
    CommitInfo,
    DomainMetadata,
    Metadata,
    Protocol,
    RemoveFile,
    SetTransaction,
    serialize_commit,
)
from deltamerge.log.data_types import (
    check_cdc_columns,
    check_column_names,
    check_supported_types,
    without_nested_not_null,
)
from deltamerge.log.protocol import (
    CHECKPOINT_PROTECTION,
    at_least,
    check_can_write,
    check_column_defaults_allowed,
    protocol_for,
    requested_features,
    requested_versions,
    upgrade,
    with_features,
)
from deltamerge.log.snapshot import DeltaLog, Snapshot
from deltamerge.stats.schema import check_stats_columns
from deltamerge.txn import faults, manifest, row_tracking
from deltamerge.txn.conflicts import (
    ISOLATION_LEVELS,
    SERIALIZABLE,
    SNAPSHOT_ISOLATION,
    WRITE_SERIALIZABLE,
    ReadPredicate,
    TransactionInfo,
    WinningCommit,
    check_conflicts,
)
from deltamerge.txn.idempotency import ConfSource
from deltamerge.txn.operations import DEFAULT_ENGINE_INFO, Operation, build_commit_info
from deltamerge.txn.validation import validate_actions

logger = logging.getLogger(__name__)

PostCommitHook = Callable[[int, Sequence[Action], Metadata], None]

_FILE_ACTIONS = (AddFile, RemoveFile, AddCDCFile)


def _table_isolation_level(metadata: Metadata | None) -> str:
    value = TableProperties.ISOLATION_LEVEL.get(metadata.configuration if metadata else {})
    if value not in (SERIALIZABLE, WRITE_SERIALIZABLE):
        raise InvalidArgumentError(
            f"Invalid delta.isolationLevel {value!r}: use 'Serializable' or 'WriteSerializable'."
        )
    return value


@dataclass(frozen=True)
class _Previous:
    """What a commit attempt follows: the previous commit's timestamp and the row ids' high-water mark."""

    timestamp: int | None
    high_water_mark: int


class OptimisticTransaction:
    """One atomic change to a table, committed optimistically on top of the snapshot it read."""

    def __init__(
        self,
        log: DeltaLog,
        snapshot: Snapshot | None = None,
        *,
        isolation_level: str | None = None,
        engine_info: str = DEFAULT_ENGINE_INFO,
        conf: ConfSource | None = None,
    ) -> None:
        if snapshot is None:
            try:
                snapshot = log.update()
            except TableNotFoundError:
                snapshot = None  # the table does not exist yet: this transaction creates it
        if isolation_level is not None and isolation_level not in ISOLATION_LEVELS:
            raise InvalidArgumentError(
                f"Unknown isolation level {isolation_level!r}; use one of {', '.join(ISOLATION_LEVELS)}."
            )
        self.log = log
        self.snapshot = snapshot
        self.read_version: int = snapshot.version if snapshot is not None else -1
        self.engine_info = engine_info
        self._isolation_override = isolation_level
        self._conf: ConfSource = conf if conf is not None else {}
        self._new_metadata: Metadata | None = None
        self._new_protocol: Protocol | None = None
        self._read_predicates: list[ReadPredicate] = []
        self._read_files: set[str] = set()
        self._read_whole_table = False
        self._read_app_ids: set[str] = set()
        self._app_txns: dict[str, SetTransaction] = {}
        self._post_commit_hooks: list[PostCommitHook] = []
        self._version_properties: list[str] = []
        self.committed_version: int | None = None

    # --- state -----------------------------------------------------------------------------------

    @property
    def is_new_table(self) -> bool:
        """True when this transaction creates the table (read version -1)."""
        return self.read_version < 0

    @property
    def metadata(self) -> Metadata | None:
        """The table metadata as this commit will leave it (updated or as read)."""
        if self._new_metadata is not None:
            return self._new_metadata
        return self.snapshot.metadata if self.snapshot is not None else None

    @property
    def protocol(self) -> Protocol | None:
        """The protocol as this commit will leave it (upgraded or as read)."""
        if self._new_protocol is not None:
            return self._new_protocol
        return self.snapshot.protocol if self.snapshot is not None else None

    def _with_column_mapping(self, metadata: Metadata) -> Metadata:
        """Ids and physical names for every field under column mapping (``log/column_mapping``):
        fields this transaction or the table already mapped keep theirs, new fields get fresh ones."""
        read = self.snapshot.metadata if self.snapshot is not None else None
        current = self.metadata
        if column_mapping.mode_of(metadata.configuration) == "none" and (
            read is None or column_mapping.mode_of(read.configuration) == "none"
        ):
            return metadata
        schema, configuration = column_mapping.assign(
            metadata.schema,
            metadata.configuration,
            current.schema if current is not None else None,
            read.configuration if read is not None else None,
        )
        return replace(
            metadata, schema_string=json.dumps(schema, separators=(",", ":")), configuration=configuration
        )

    def update_metadata(self, metadata: Metadata) -> None:
        """Change schema, partitioning or properties in this commit (and upgrade the protocol if needed).

        The table id never changes: on an existing table the id (and a missing ``createdTime``)
        are taken from the current metadata.
        """
        if self.snapshot is not None:
            current = self.snapshot.metadata
            metadata = replace(
                metadata,
                id=current.id,
                created_time=metadata.created_time
                if metadata.created_time is not None
                else current.created_time,
            )
        else:
            metadata = replace(
                metadata,
                id=metadata.id or str(uuid.uuid4()),
                created_time=metadata.created_time if metadata.created_time is not None else _now_ms(),
            )
        # Property values are strings in the log ("true", not true).
        configuration = {k: _conf_str(v) for k, v in metadata.configuration.items()}
        configuration, min_reader, min_writer = requested_versions(configuration)
        configuration, features = requested_features(configuration)
        metadata = replace(metadata, configuration=configuration)
        current_schema = metadata.schema
        schema = char_varchar.to_delta(current_schema)  # CHAR/VARCHAR are strings in Delta's schema
        if schema is not current_schema:
            metadata = replace(metadata, schema_string=json.dumps(schema, separators=(",", ":")))
        read = self.snapshot.metadata if self.snapshot is not None else None
        if read is None or metadata.schema_string != read.schema_string:  # a schema change (Delta's test)
            allow = bool(SessionConf.ALLOW_UNENFORCED_NOT_NULL.get(self._conf))
            loose = without_nested_not_null(metadata.schema, allow=allow)
            if loose != metadata.schema:
                metadata = replace(metadata, schema_string=json.dumps(loose, separators=(",", ":")))
        metadata = self._with_column_mapping(metadata)
        schema_columns = {f.get("name") for f in metadata.schema.get("fields", [])}
        missing = [c for c in metadata.partition_columns if c not in schema_columns]
        if missing:
            raise InvalidArgumentError(
                f"Partition column(s) {missing} are not in the table schema. Partition by existing columns."
            )
        paths.check_partition_column_types(metadata.schema, metadata.partition_columns)
        check_supported_types(metadata.schema, type_check=bool(SessionConf.SCHEMA_TYPE_CHECK.get(self._conf)))
        check_cdc_columns(metadata.schema, metadata.configuration, read.configuration if read else None)
        if column_mapping.mode_of(metadata.configuration) == "none":
            check_column_names(
                metadata.schema,
                metadata.partition_columns,
                check_partitions=bool(SessionConf.PARTITION_COLUMN_CHECK.get(self._conf)),
            )
        check_stats_columns(metadata.schema, metadata.partition_columns, metadata.configuration)
        if SessionConf.PROPERTY_CONSTRAINTS_CHECK.get(self._conf):
            manifest.check_properties(metadata, self.snapshot)
        self._new_metadata = metadata
        base = self._new_protocol or (self.snapshot.protocol if self.snapshot is not None else None)
        if base is None:
            self._new_protocol = protocol_for(metadata.configuration, metadata.schema)
        else:
            upgraded = upgrade(base, metadata.configuration, metadata.schema)
            if upgraded is not None:
                self._new_protocol = upgraded
        if (min_reader, min_writer) != (1, 1):
            protocol = self.protocol
            assert protocol is not None
            raised = at_least(protocol, min_reader, min_writer)
            if raised != protocol:
                self._new_protocol = raised
        if features:
            protocol = self.protocol
            assert protocol is not None
            extended = with_features(protocol, features)
            if extended != protocol:
                self._new_protocol = extended
        assert self.protocol is not None
        check_column_defaults_allowed(self.protocol, metadata.schema)
        self._new_metadata = row_tracking.with_column_names(self.protocol, read, metadata)

    def update_protocol(self, protocol: Protocol) -> None:
        """Set an explicit protocol in this commit (e.g. to add a table feature)."""
        self._new_protocol = protocol

    def set_property_to_commit_version(self, key: str) -> None:
        """Give table property ``key`` the version this commit lands at (decided per attempt, so a
        retry after a concurrent commit keeps it right): Delta's checkpoint-protection version."""
        self._version_properties.append(key)

    # --- recording reads -------------------------------------------------------------------------

    def add_read_predicate(self, may_match: Callable[[AddFile], bool], description: str) -> None:
        """Record a filter used to select files; concurrent adds it may match are conflicts."""
        self._read_predicates.append(ReadPredicate(may_match, description))

    def add_read_files(self, files: Iterable[AddFile]) -> None:
        """Record files actually read; their concurrent removal is a conflict."""
        self._read_files.update(f.path for f in files)

    def mark_read_whole_table(self) -> None:
        """Record a full-table read: any concurrent add or remove of data conflicts."""
        self._read_whole_table = True

    def read_app_version(self, app_id: str) -> int | None:
        """The last committed version of ``app_id`` (idempotent writes); recorded as read."""
        self._read_app_ids.add(app_id)
        if self.snapshot is None:
            return None
        return self.snapshot.app_versions.get(app_id)

    def set_app_transaction(self, app_id: str, version: int) -> None:
        """Record ``txn(app_id, version)`` in this commit."""
        self._app_txns[app_id] = SetTransaction(app_id=app_id, version=version, last_updated=_now_ms())

    # --- commit ----------------------------------------------------------------------------------

    def _isolation_level(self, actions: Sequence[Action], operation: Operation, metadata: Metadata) -> str:
        level = self._isolation_override or _table_isolation_level(metadata)
        if level == SNAPSHOT_ISOLATION or self._app_txns or self._new_metadata or self._new_protocol:
            return level
        # delta-spark: a commit of only dataChange=false file actions (OPTIMIZE) runs at
        # SnapshotIsolation; under WriteSerializable the operation must also not change data.
        if any(not isinstance(a, _FILE_ACTIONS) for a in actions):
            return level
        data_changed = any(a.data_change for a in actions if isinstance(a, _FILE_ACTIONS))
        if level == SERIALIZABLE and not data_changed:
            return SNAPSHOT_ISOLATION
        if level == WRITE_SERIALIZABLE and not data_changed and not operation.changes_data:
            return SNAPSHOT_ISOLATION
        return level

    def _is_blind_append(self, actions: Sequence[Action]) -> bool:
        reads = self._read_predicates or self._read_files or self._read_whole_table
        if reads or self._new_metadata is not None or self.is_new_table:
            return False
        files = [a for a in actions if isinstance(a, _FILE_ACTIONS)]
        return all(isinstance(a, AddFile) and a.data_change for a in files)

    def commit(
        self, actions: Sequence[Action], operation: Operation, *, user_metadata: str | None = None
    ) -> int:
        """Commit ``actions`` atomically; returns the committed version.

        Raises a :class:`ConcurrentModificationError` subclass when a concurrent commit conflicts,
        :class:`MaxCommitAttemptsError` after too many lost races without conflicts.
        """
        if self.committed_version is not None:
            raise CommitError(f"This transaction already committed version {self.committed_version}.")
        if user_metadata is None:  # Delta's session-wide commitInfo.userMetadata
            user_metadata = SessionConf.USER_METADATA.get(self._conf) or None
        actions = list(actions)
        metadata = self.metadata
        protocol = self.protocol
        if metadata is None or protocol is None:
            raise InvalidArgumentError(
                f"{self.log.table_root} does not exist yet: a creating transaction must call "
                "update_metadata() with the table schema before commit()."
            )
        check_can_write(protocol, metadata)
        read_metadata = self.snapshot.metadata if self.snapshot is not None else metadata
        validate_actions(actions, metadata, protocol, read_metadata, self._app_txns.keys())
        read = self.snapshot.metadata if self.snapshot is not None else None
        if (
            self.snapshot is not None
            and row_tracking.is_enabled(protocol, metadata)
            and not row_tracking.is_enabled(self.snapshot.protocol, read)
        ):
            # Enabling on a table with history: every file needs ids first (Delta's backfill);
            # re-adding them reads the whole table, so a concurrent change conflicts.
            refill = row_tracking.backfill(self.snapshot.files)
            if refill:
                self.add_read_files(refill)
                self.mark_read_whole_table()
                actions += refill
        if self._new_metadata is not None and self.snapshot is not None:
            # A clustering column the new schema lacks leaves the clustering columns (REPLACE).
            reclustered = clustering.after_schema_change(protocol, self.snapshot.domains, metadata.schema)
            if reclustered is not None and not any(
                isinstance(a, DomainMetadata) and a.domain == clustering.DOMAIN for a in actions
            ):
                actions.append(reclustered)
        isolation = self._isolation_level(actions, operation, metadata)
        is_blind_append = self._is_blind_append(actions)
        txn_id = str(uuid.uuid4())
        ict = TableProperties.ENABLE_ICT.get(metadata.configuration)
        # Delta records when in-commit timestamps were turned on for a table that has older commits.
        ict_enabling = ict and read is not None and not TableProperties.ENABLE_ICT.get(read.configuration)

        built: dict[int, list[Action]] = {}  # per attempted version: the actions its file holds

        def build(version: int, previous: _Previous) -> bytes:
            # Rebuilt per attempt: the in-commit timestamp follows the commit that precedes it, and
            # fresh row ids start above the latest high-water mark.
            now = _now_ms()
            previous_ts = previous.timestamp
            in_commit_ts = max(now, previous_ts + 1) if ict and previous_ts is not None else now
            commit_metadata = metadata
            if ict_enabling and version > 0:
                configuration = dict(metadata.configuration)
                configuration[TableProperties.ICT_ENABLEMENT_VERSION.key] = str(version)
                configuration[TableProperties.ICT_ENABLEMENT_TIMESTAMP.key] = str(in_commit_ts)
                commit_metadata = replace(metadata, configuration=configuration)
            if self._version_properties:
                configuration = {
                    **commit_metadata.configuration,
                    **dict.fromkeys(self._version_properties, str(version)),
                }
                commit_metadata = replace(commit_metadata, configuration=configuration)
            commit_info = build_commit_info(
                operation,
                timestamp=now,
                read_version=self.read_version if not self.is_new_table else None,
                isolation_level=isolation,
                is_blind_append=is_blind_append,
                engine_info=self.engine_info,
                txn_id=txn_id,
                user_metadata=user_metadata,
                in_commit_timestamp=in_commit_ts if ict else None,
                tags=row_tracking.commit_tags(self.snapshot, operation.name),
            )
            payload: list[Action] = [commit_info]
            if self.is_new_table or self._new_protocol is not None:
                payload.append(protocol)
            if self.is_new_table or self._new_metadata is not None:
                payload.append(commit_metadata)
            payload += list(self._app_txns.values())
            payload += row_tracking.assign(
                actions,
                protocol=protocol,
                metadata=metadata,
                high_water_mark=previous.high_water_mark,
                version=version,
            )
            built[version] = payload
            return serialize_commit(payload)

        faults.fault("before_commit_write")  # data files are written, the log has nothing yet
        all_txns = [*self._app_txns.values(), *(a for a in actions if isinstance(a, SetTransaction))]
        info = TransactionInfo(
            read_version=self.read_version,
            isolation_level=isolation,
            read_predicates=tuple(self._read_predicates),
            read_file_paths=frozenset(self._read_files),
            read_whole_table=self._read_whole_table,
            read_app_ids=frozenset(self._read_app_ids | {t.app_id for t in all_txns}),
            metadata_changed=self.is_new_table or self._new_metadata is not None,
            protocol_changed=self.is_new_table or self._new_protocol is not None,
            removed_paths=frozenset(a.path for a in actions if isinstance(a, RemoveFile)),
            # The row ids' high-water mark is recomputed per attempt, never a conflict.
            domains=frozenset(
                a.domain for a in actions if isinstance(a, DomainMetadata) and a.domain != row_tracking.DOMAIN
            ),
        )
        previous = _Previous(
            self.snapshot.timestamp if self.snapshot is not None else None,
            row_tracking.high_water_mark(self.snapshot.domains)
            if self.snapshot is not None
            else row_tracking.MISSING_HIGH_WATER_MARK,
        )
        version = self._write_with_retries(build, previous, info)
        self.committed_version = version
        self._post_commit(version, metadata, built[version])
        if manifest.manifest_enabled(metadata) and any(isinstance(a, _FILE_ACTIONS) for a in actions):
            self._update_manifests(version, actions)
        for hook in self._post_commit_hooks:
            try:
                hook(version, actions, metadata)
            except Exception:  # as Delta's hooks by default: the commit stands, the failure is logged
                logger.warning("A post-commit hook failed after version %d", version, exc_info=True)
        return version

    def register_post_commit_hook(self, hook: PostCommitHook) -> None:
        """Run ``hook(version, actions, metadata)`` once this transaction's commit has landed (Delta's
        ``registerPostCommitHook``). A failing hook is logged; it never fails the commit."""
        if hook not in self._post_commit_hooks:
            self._post_commit_hooks.append(hook)

    def _max_attempts(self) -> int:
        return max(1, SessionConf.MAX_COMMIT_ATTEMPTS.get(self._conf))

    def _write_with_retries(
        self, build: Callable[[int, _Previous], bytes], previous: _Previous, info: TransactionInfo
    ) -> int:
        """Write ``build(version, state after version - 1)`` at the first free version."""
        store = self.log.store
        version = self.read_version + 1
        checked_up_to = self.read_version
        max_attempts = self._max_attempts()
        for attempt in range(1, max_attempts + 1):
            data = build(version, previous)
            try:
                faults.fault("after_tmp_write_before_link", store, filenames.commit_name(version), data)
                store.write_exclusive(filenames.commit_name(version), data)
                if attempt > 1:
                    logger.info("Committed version %d after %d attempts", version, attempt)
                return version
            except FileExistsError:
                pass
            latest = max(self.log.latest_version(), version)
            # Check every winner we have not checked yet, in version order.
            for w in range(checked_up_to + 1, latest + 1):
                winner = tuple(self.log.read_commit(w))
                check_conflicts(info, WinningCommit(w, winner))
                mark = row_tracking.high_water_mark(winner)
                previous = _Previous(
                    self._commit_time(w, winner),
                    mark if mark != row_tracking.MISSING_HIGH_WATER_MARK else previous.high_water_mark,
                )
            checked_up_to = latest
            version = latest + 1
        raise MaxCommitAttemptsError(
            f"The commit lost the race for a version {max_attempts} times in a row without a logical "
            f"conflict (last tried version {version}). The table is under heavy concurrent writing; retry "
            f"later or raise {SessionConf.MAX_COMMIT_ATTEMPTS.key}."
        )

    def _commit_time(self, version: int, actions: Sequence[Action]) -> int:
        """A commit's timestamp: its in-commit timestamp, else its file's modification time."""
        info = next((a for a in actions if isinstance(a, CommitInfo)), None)
        if info is not None and info.in_commit_timestamp is not None:
            return info.in_commit_timestamp
        return self.log.store.mtime(filenames.commit_name(version))

    def _post_commit(self, version: int, metadata: Metadata, written: Sequence[Action]) -> None:
        # The commit has landed: nothing below may turn it into a failure.
        try:
            interval = TableProperties.CHECKPOINT_INTERVAL.get(metadata.configuration)
            self.log.update(known={version: written})
            if version > 0 and interval > 0 and version % interval == 0:
                snapshot = self.log.snapshot(version)
                faults.fault("before_checkpoint")  # the commit landed, its checkpoint is due
                faults.fault("mid_checkpoint", self.log.store, filenames.checkpoint_name(version), snapshot)
                self.log.checkpoint(snapshot)
                self._clean_up_expired_logs(snapshot)
        except Exception:  # post-commit work is best effort by design
            logger.warning("Post-commit work (checkpoint) failed for version %d", version, exc_info=True)

    def _clean_up_expired_logs(self, snapshot: Snapshot) -> None:
        """Delta's metadata cleanup after a checkpoint (``log/cleanup.py``)."""
        configuration = snapshot.metadata.configuration
        if not TableProperties.EXPIRED_LOG_CLEANUP.get(configuration):
            return
        if CHECKPOINT_PROTECTION in (snapshot.protocol.writer_features or ()):
            return
        retention = TableProperties.LOG_RETENTION_MS.get(configuration)
        deleted = cleanup.delete_expired_logs(self.log.store, retention, int(time.time() * 1000))
        if deleted:
            logger.info("Deleted %d expired log files of %s", len(deleted), self.log.table_root)

    def _update_manifests(self, version: int, actions: Sequence[Action]) -> None:
        # Delta's GenerateSymlinkManifest post-commit hook: unlike the checkpoint, a failure is the
        # caller's error (readers of the manifests would see stale files), though the commit stands.
        try:
            manifest.generate_incremental(
                self.log.table_root, self.snapshot, self.log.snapshot(version), actions
            )
        except UnsupportedOperationError:
            raise  # deletion vectors or column mapping: Delta raises these as they are
        except Exception as e:
            raise PostCommitHookError(
                f"Committing to the Delta table version {version} succeeded but error while executing "
                f"post-commit hook {manifest.HOOK_NAME}: {e}. Run 'GENERATE symlink_format_manifest FOR "
                "TABLE ...' to bring the manifests up to date.",
                sql_state="2DKD0",
            ) from e


def _conf_str(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _now_ms() -> int:
    return int(time.time() * 1000)
