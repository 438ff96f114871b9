"""The one exception hierarchy of deltamerge.

Every error carries a Delta (or Spark) error class and renders as ``[ERROR_CLASS] message``, so a
user who searches for Delta's error text finds the same explanation. Messages say what to do.
"""

from __future__ import annotations


class DeltaMergeError(Exception):
    """Root of every error deltamerge raises on purpose."""

    error_class: str = "DELTA_ERROR"
    sql_state: str | None = None

    def __init__(self, message: str, *, error_class: str | None = None, sql_state: str | None = None):
        if error_class is not None:
            self.error_class = error_class
        if sql_state is not None:
            self.sql_state = sql_state
        self.message = message
        super().__init__(f"[{self.error_class}] {message}")

    def getErrorClass(self) -> str:
        """The error class, as PySpark's ``AnalysisException.getErrorClass()``."""
        return self.error_class

    def getCondition(self) -> str:
        """Spark 4 name of the error class accessor."""
        return self.error_class

    # PySpark's exception accessors: once Spark is in use, deltamerge's errors are PySpark's
    # exception types too (deltamerge.spark.pyspark_errors), and these answer for them.
    def __str__(self) -> str:
        return f"[{self.error_class}] {self.message}"

    def getMessage(self) -> str:
        """The whole message, ``[ERROR_CLASS] text``."""
        return str(self)

    def getSqlState(self) -> str | None:
        """The SQL state of the error class (None when it has none)."""
        return self.sql_state

    def getMessageParameters(self) -> dict[str, str]:
        """No parameters: the message is already rendered."""
        return {}

    def getQueryContext(self) -> list:
        """No query context: the error is deltamerge's, not a position in a query Spark ran."""
        return []


# --- table and log ------------------------------------------------------------------------------


class TableNotFoundError(DeltaMergeError):
    """The path holds no Delta table."""

    error_class = "DELTA_MISSING_DELTA_TABLE"
    sql_state = "42P01"


class TableAlreadyExistsError(DeltaMergeError):
    """A write in mode ``error`` found an existing table."""

    error_class = "DELTA_PATH_EXISTS"
    sql_state = "42K04"


class LogCorruptedError(DeltaMergeError):
    """The transaction log cannot be read as a valid sequence of commits."""

    error_class = "DELTA_LOG_CORRUPTED"
    sql_state = "XXKDS"


class VersionNotFoundError(DeltaMergeError):
    """Time travel to a version or timestamp the log cannot serve."""

    error_class = "DELTA_VERSION_NOT_FOUND"
    sql_state = "22003"


class ProtocolError(DeltaMergeError):
    """The table's protocol asks for something this library does not implement."""

    error_class = "DELTA_UNSUPPORTED_FEATURES_FOR_WRITE"
    sql_state = "56038"


class UnsupportedFeatureError(ProtocolError):
    """A reader or writer table feature that deltamerge does not implement."""


class TableFeatureError(ProtocolError):
    """A table feature cannot be dropped (yet): Delta's ``DeltaTableFeatureException``."""

    error_class = "DELTA_FEATURE_DROP_UNSUPPORTED_CLIENT_FEATURE"
    sql_state = "0AKDC"


class SchemaMismatchError(DeltaMergeError):
    """Data written does not fit the table schema or partitioning (Delta's metadata mismatch)."""

    error_class = "DELTA_METADATA_MISMATCH"
    sql_state = "42KDG"


class InvariantViolationError(DeltaMergeError):
    """A NOT NULL, CHECK constraint or column invariant was violated by written data."""

    error_class = "DELTA_VIOLATE_CONSTRAINT_WITH_VALUES"
    sql_state = "23001"


class InvalidArgumentError(DeltaMergeError, ValueError):
    """An argument is not valid for the called operation."""

    error_class = "DELTA_ILLEGAL_ARGUMENT"
    sql_state = "22023"


# --- commits --------------------------------------------------------------------------------------


class CommitError(DeltaMergeError):
    """A commit could not be made."""

    error_class = "DELTA_COMMIT_FAILED"


class ConcurrentModificationError(CommitError):
    """A concurrent commit conflicts logically with this transaction."""

    sql_state = "2D521"


class ConcurrentAppendError(ConcurrentModificationError):
    """Files were added concurrently to data this transaction read."""

    error_class = "DELTA_CONCURRENT_APPEND"


class ConcurrentDeleteReadError(ConcurrentModificationError):
    """A file this transaction read was removed concurrently."""

    error_class = "DELTA_CONCURRENT_DELETE_READ"


class ConcurrentDeleteDeleteError(ConcurrentModificationError):
    """A file this transaction removes was removed concurrently too."""

    error_class = "DELTA_CONCURRENT_DELETE_DELETE"


class MetadataChangedError(ConcurrentModificationError):
    """The table metadata changed concurrently."""

    error_class = "DELTA_METADATA_CHANGED"


class ProtocolChangedError(ConcurrentModificationError):
    """The table protocol changed concurrently."""

    error_class = "DELTA_PROTOCOL_CHANGED"


class ConcurrentTransactionError(ConcurrentModificationError):
    """A concurrent commit used the same idempotent-write app id or domain."""

    error_class = "DELTA_CONCURRENT_TRANSACTION"


class PostCommitHookError(CommitError):
    """A post-commit hook (symlink manifests) failed after its commit landed: the table has the new
    version; rerun the hook's work (e.g. ``GENERATE symlink_format_manifest``)."""

    error_class = "DELTA_POST_COMMIT_HOOK_FAILED"


class MaxCommitAttemptsError(CommitError):
    """The commit kept losing races beyond the configured number of attempts."""

    error_class = "DELTA_MAX_COMMIT_RETRIES_EXCEEDED"


class MaterializedSourceLostError(DeltaMergeError):
    """Every attempt of a MERGE lost blocks of its materialized source (executors were lost)."""

    error_class = "DELTA_MERGE_MATERIALIZE_SOURCE_FAILED_REPEATEDLY"
    sql_state = "25000"


class NumRecordsMismatchError(DeltaMergeError):
    """A MERGE, UPDATE or DELETE about to commit a row count its clauses cannot produce (a bug)."""

    error_class = "DELTA_NUM_RECORDS_MISMATCH"
    sql_state = "XXKDS"


# --- analysis (MERGE and friends) -----------------------------------------------------------------


class AnalysisError(DeltaMergeError):
    """A statement cannot be analysed: bad names, bad clause shape, bad types."""

    error_class = "DELTA_ANALYSIS_ERROR"
    sql_state = "42000"


class ParseError(AnalysisError):
    """SQL text that does not parse."""

    error_class = "PARSE_SYNTAX_ERROR"
    sql_state = "42601"


class MultipleSourceRowMatchingTargetRowError(DeltaMergeError):
    """More than one source row matched the same target row in a MERGE that updates or deletes."""

    error_class = "DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE"
    sql_state = "21506"


class UnsupportedOperationError(DeltaMergeError):
    """An operation deltamerge (or Delta) does not support in this form."""

    error_class = "DELTA_UNSUPPORTED_OPERATION"
    sql_state = "0AKDC"


class AppendOnlyTableError(UnsupportedOperationError):
    """A commit would delete or rewrite data of a table with ``delta.appendOnly=true``."""

    error_class = "DELTA_CANNOT_MODIFY_APPEND_ONLY"
    sql_state = "42809"


# --- change data feed -----------------------------------------------------------------------------


class ChangeDataNotRecordedError(InvalidArgumentError):
    """A change data feed read covers a version written without ``delta.enableChangeDataFeed``."""

    error_class = "DELTA_MISSING_CHANGE_DATA"
    sql_state = "KD002"
