"""Row tracking in the transaction: fresh row id ranges, default commit versions, the high-water
mark, retries and the materialized column names (the data path is tested in tests/spark)."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest
from txntest_helpers import table_metadata

from deltamerge.errors import InvalidArgumentError, UnsupportedOperationError
from deltamerge.log.actions import AddFile, DomainMetadata
from deltamerge.log.snapshot import DeltaLog
from deltamerge.txn import row_tracking
from deltamerge.txn.operations import Operation
from deltamerge.txn.transaction import OptimisticTransaction

SUPPORTED = {"delta.feature.rowTracking": "supported"}


def add(rows: int | None, **kw) -> AddFile:  # type: ignore[no-untyped-def]
    stats = None if rows is None else json.dumps({"numRecords": rows})
    return AddFile(
        f"p=a/part-{uuid.uuid4().hex}.parquet",
        {"p": "a"},
        size=100,
        modification_time=int(time.time() * 1000),
        stats=stats,
        **kw,
    )


def create(root: str, configuration: dict[str, str], *files: AddFile) -> DeltaLog:
    log = DeltaLog(root)
    txn = OptimisticTransaction(log)
    txn.update_metadata(table_metadata(configuration))
    txn.commit(list(files), Operation("CREATE TABLE"))
    return log


def append(log: DeltaLog, *files: AddFile) -> int:
    return OptimisticTransaction(log).commit(list(files), Operation("WRITE", {"mode": "Append"}))


def ids(log: DeltaLog) -> dict[int, tuple[int | None, int | None]]:
    """(baseRowId, defaultRowCommitVersion) per file, keyed by its row count."""
    return {f.num_records or 0: (f.base_row_id, f.default_row_commit_version) for f in log.update().files}


def test_new_files_get_consecutive_id_ranges_and_their_commit_version(tmp_path: Path) -> None:
    log = create(str(tmp_path / "t"), SUPPORTED, add(3), add(5))
    snap = log.snapshot()
    assert {"rowTracking", "domainMetadata"} <= set(snap.protocol.writer_features or ())
    conf = snap.metadata.configuration
    assert conf[row_tracking.ROW_ID_COLUMN].startswith("_row-id-col-")
    assert conf[row_tracking.COMMIT_VERSION_COLUMN].startswith("_row-commit-version-col-")
    assert ids(log) == {3: (0, 0), 5: (3, 0)}
    assert row_tracking.high_water_mark(snap.domains) == 7
    assert append(log, add(10)) == 1
    assert ids(log)[10] == (8, 1)
    assert row_tracking.high_water_mark(log.snapshot().domains) == 17
    # A file that carries its ids keeps them (a deletion vector added to an existing file), and an
    # empty file takes no ids: the mark does not move, so no domain is written.
    kept = add(4, base_row_id=100, default_row_commit_version=0)
    assert append(log, kept, add(0)) == 2
    snap = log.update()
    assert {(f.base_row_id, f.default_row_commit_version) for f in snap.files if f.num_records in (0, 4)} == {
        (100, 0),
        (18, 2),
    }
    assert row_tracking.high_water_mark(snap.domains) == 17
    assert not [a for a in log.read_commit(2) if isinstance(a, DomainMetadata)]
    # The names stay when the metadata changes again.
    txn = OptimisticTransaction(log)
    txn.update_metadata(table_metadata({**conf, "x": "y"}))
    txn.commit([], Operation("SET TBLPROPERTIES"))
    assert log.update().metadata.configuration[row_tracking.ROW_ID_COLUMN] == conf[row_tracking.ROW_ID_COLUMN]


def test_a_retry_takes_ids_above_the_winners(tmp_path: Path) -> None:
    log = create(str(tmp_path / "t"), SUPPORTED, add(2))
    loser = OptimisticTransaction(log)
    assert append(log, add(5)) == 1  # the winner takes ids 2..6
    assert loser.commit([add(3)], Operation("WRITE", {"mode": "Append"})) == 2
    assert ids(log) == {2: (0, 0), 5: (2, 1), 3: (7, 2)}
    assert row_tracking.high_water_mark(log.update().domains) == 9


def test_rules(tmp_path: Path) -> None:
    log = create(str(tmp_path / "t"), SUPPORTED)
    with pytest.raises(InvalidArgumentError) as exc:
        append(log, add(None))
    assert exc.value.error_class == "DELTA_ROW_ID_ASSIGNMENT_WITHOUT_STATS"
    with pytest.raises(InvalidArgumentError, match="high water mark"):
        append(log, DomainMetadata(row_tracking.DOMAIN, '{"rowIdHighWaterMark":99}'))  # type: ignore[arg-type]
    assert log.update().version == 0
    # Suspended: files get no ids.
    suspended = create(str(tmp_path / "s"), {**SUPPORTED, row_tracking.SUSPENDED: "true"}, add(3))
    assert ids(suspended) == {3: (None, None)}
    with pytest.raises(UnsupportedOperationError) as exc2:
        row_tracking.is_suspended(
            table_metadata({row_tracking.SUSPENDED: "true", row_tracking.ENABLED: "true"})
        )
    assert exc2.value.error_class == "DELTA_ROW_TRACKING_ILLEGAL_PROPERTY_COMBINATION"
    # A column named like a materialized column is refused.
    meta = table_metadata({row_tracking.ROW_ID_COLUMN: "id"})
    with pytest.raises(InvalidArgumentError) as exc3:
        row_tracking.with_column_names(log.snapshot().protocol, meta, meta)
    assert exc3.value.error_class == "DELTA_ADDING_COLUMN_WITH_INTERNAL_NAME_FAILED"
    # Without the feature, names copied from another table are dropped.
    plain = create(str(tmp_path / "p"), {row_tracking.ROW_ID_COLUMN: "_row-id-col-x"})
    assert row_tracking.ROW_ID_COLUMN not in plain.snapshot().metadata.configuration


def test_ids_and_the_mark_survive_a_checkpoint(tmp_path: Path) -> None:
    log = create(str(tmp_path / "t"), {**SUPPORTED, "delta.checkpointInterval": "2"}, add(3))
    assert append(log, add(4)) == 1 and append(log, add(5)) == 2  # version 2 is checkpointed
    assert (tmp_path / "t" / "_delta_log" / f"{2:020d}.checkpoint.parquet").exists()
    (tmp_path / "t" / "_delta_log" / f"{2:020d}.json").unlink()  # the checkpoint alone
    fresh = DeltaLog(str(tmp_path / "t"))
    assert ids(fresh) == {3: (0, 0), 4: (3, 1), 5: (7, 2)}
    assert row_tracking.high_water_mark(fresh.update().domains) == 11
    assert append(fresh, add(1)) == 3 and ids(fresh)[1] == (12, 3)
