"""``ALTER TABLE ... ADD CONSTRAINT name CHECK (expr)`` / ``DROP CONSTRAINT [IF EXISTS] name``, as
Delta's ``AlterTableAddConstraintDeltaCommand`` / ``AlterTableDropConstraintDeltaCommand``: the
existing rows are checked first, the constraint is the property ``delta.constraints.<name>``, and
every later write (MERGE included) enforces it."""

from __future__ import annotations

from pathlib import Path

import pytest

import deltamerge
from deltamerge import DeltaTable, constraint_ddl
from deltamerge.errors import ConcurrentAppendError, DeltaMergeError
from deltamerge.log.snapshot import DeltaLog

pytestmark = pytest.mark.spark


def _table(spark, tmp_path: Path) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    path = str(tmp_path / "t")
    deltamerge.write(
        spark.range(5).selectExpr("id", "CASE WHEN id = 4 THEN NULL ELSE id * 10 END AS v"), path
    )
    return path, f"delta.`{path}`"


def _last_commit(path: str) -> tuple[int, dict, dict]:
    log = DeltaLog.for_table(path)
    snap = log.update()
    info = next(a for a in log.read_commit(snap.version) if type(a).__name__ == "CommitInfo")
    return snap.version, dict(snap.metadata.configuration), info.raw


def test_add_and_drop_constraint(spark, tmp_path: Path) -> None:
    path, t = _table(spark, tmp_path)
    deltamerge.sql(spark, f"ALTER TABLE {t} ADD CONSTRAINT idNonNegative CHECK (id >= 0)")
    _, conf, info = _last_commit(path)
    assert conf["delta.constraints.idnonnegative"] == "id >= 0"
    assert info["operation"] == "ADD CONSTRAINT"
    assert info["operationParameters"] == {"name": "idNonNegative", "expr": "id >= 0"}
    snap = DeltaLog.for_table(path).update()
    assert (snap.protocol.min_reader_version, snap.protocol.min_writer_version) == (1, 3)
    with pytest.raises(DeltaMergeError, match="DELTA_VIOLATE_CONSTRAINT_WITH_VALUES") as e:
        deltamerge.write(spark.sql("SELECT -1L AS id, 0L AS v"), path, mode="append")
    assert "DROP CONSTRAINT idnonnegative" in str(e.value)
    with pytest.raises(DeltaMergeError, match="DELTA_CONSTRAINT_ALREADY_EXISTS"):
        deltamerge.sql(spark, f"ALTER TABLE {t} ADD CONSTRAINT IDNONNEGATIVE CHECK (id > -5)")
    deltamerge.sql(spark, f"ALTER TABLE {t} DROP CONSTRAINT IdNonNegative")
    _, conf, info = _last_commit(path)
    assert not any(k.startswith("delta.constraints.") for k in conf)
    assert info["operation"] == "DROP CONSTRAINT"
    assert info["operationParameters"] == {"name": "IdNonNegative", "expr": "id >= 0"}
    deltamerge.write(spark.sql("SELECT -1L AS id, 0L AS v"), path, mode="append")


def test_existing_rows_must_satisfy_a_new_constraint(spark, tmp_path: Path) -> None:
    path, t = _table(spark, tmp_path)
    before = DeltaLog.for_table(path).update().version
    # id 3 fails, id 4's NULL is unknown: both count, as in Delta (NOT expr OR expr IS NULL).
    with pytest.raises(
        DeltaMergeError, match=r"DELTA_NEW_CHECK_CONSTRAINT_VIOLATION.*2 rows in .* \(v < 30\)"
    ):
        deltamerge.sql(spark, f"ALTER TABLE {t} ADD CONSTRAINT small CHECK (v < 30)")
    assert DeltaLog.for_table(path).update().version == before
    deltamerge.sql(spark, f"ALTER TABLE {t} ADD CONSTRAINT small CHECK (coalesce(v, 0) < 50)")


@pytest.mark.sampled
@pytest.mark.parametrize(
    ("expression", "error_class"),
    [
        ("id + 1", "DELTA_NON_BOOLEAN_CHECK_CONSTRAINT"),
        ("no_such_column > 0", "DELTA_INVALID_CHECK_CONSTRAINT_REFERENCES"),
        ("rand() > 0.5", "DELTA_NON_DETERMINISTIC_EXPRESSION_IN_CHECK_CONSTRAINT"),
        ("max(id) > 0", "DELTA_AGGREGATE_IN_CHECK_CONSTRAINT"),
    ],
)
def test_invalid_constraint_expressions(spark, tmp_path: Path, expression: str, error_class: str) -> None:
    path, t = _table(spark, tmp_path)
    with pytest.raises(DeltaMergeError, match=error_class):
        deltamerge.sql(spark, f"ALTER TABLE {t} ADD CONSTRAINT c CHECK ({expression})")
    assert DeltaLog.for_table(path).update().version == 0


def test_drop_missing_constraint(spark, spark_conf, tmp_path: Path) -> None:
    path, t = _table(spark, tmp_path)
    with pytest.raises(DeltaMergeError, match=r"DELTA_CONSTRAINT_DOES_NOT_EXIST.*IF EXISTS"):
        deltamerge.sql(spark, f"ALTER TABLE {t} DROP CONSTRAINT nope")
    deltamerge.sql(spark, f"ALTER TABLE {t} DROP CONSTRAINT IF EXISTS nope")
    _, _, info = _last_commit(path)
    assert info["operation"] == "DROP CONSTRAINT" and info["operationParameters"] == {"name": "nope"}
    spark_conf({"spark.databricks.delta.constraints.assumesDropIfExists.enabled": "true"})
    deltamerge.sql(spark, f"ALTER TABLE {t} DROP CONSTRAINT nope")


def test_constraints_are_not_table_properties(spark, tmp_path: Path) -> None:
    _, t = _table(spark, tmp_path)
    with pytest.raises(DeltaMergeError, match="DELTA_ADD_CONSTRAINTS"):
        deltamerge.sql(spark, f"ALTER TABLE {t} SET TBLPROPERTIES ('delta.constraints.c' = 'id > 0')")


def test_merge_enforces_an_added_constraint(spark, tmp_path: Path) -> None:
    path, t = _table(spark, tmp_path)
    deltamerge.sql(spark, f"ALTER TABLE {t} ADD CONSTRAINT `v limit` CHECK (v IS NULL OR v < 100)")
    version = DeltaLog.for_table(path).update().version
    source = spark.sql("SELECT 1L AS id, 500L AS v UNION ALL SELECT 9L, 1L")
    table = DeltaTable.forPath(spark, path)
    with pytest.raises(DeltaMergeError, match=r"DELTA_VIOLATE_CONSTRAINT_WITH_VALUES.*v limit"):
        table.alias("t").merge(
            source.alias("s"), "t.id = s.id"
        ).whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
    assert DeltaLog.for_table(path).update().version == version
    ok = spark.sql("SELECT 1L AS id, 50L AS v")
    table.alias("t").merge(ok.alias("s"), "t.id = s.id").whenMatchedUpdateAll().execute()
    assert sorted(tuple(r) for r in deltamerge.read(spark, path).collect())[1] == (1, 50)


def test_rows_appended_during_the_check_conflict(spark, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The check reads the whole table in the committing transaction: a row appended meanwhile
    (which the check did not see) makes the commit fail instead of slipping past the constraint."""
    path, t = _table(spark, tmp_path)
    real = constraint_ddl.read_snapshot

    def racing(spark_, snap):  # type: ignore[no-untyped-def]
        df = real(spark_, snap)
        deltamerge.write(spark.sql("SELECT -7L AS id, 0L AS v"), path, mode="append")
        return df

    monkeypatch.setattr(constraint_ddl, "read_snapshot", racing)
    with pytest.raises(ConcurrentAppendError):
        deltamerge.sql(spark, f"ALTER TABLE {t} ADD CONSTRAINT pos CHECK (id >= 0)")
    snap = DeltaLog.for_table(path).update()
    assert "delta.constraints.pos" not in snap.metadata.configuration
    assert snap.version == 1  # the racing append landed; the constraint did not


@pytest.mark.parametrize(
    "constraint",
    [
        "CONSTRAINT pos CHECK (v >= 0)",
        "CHECK (v >= 0)",
        "PRIMARY KEY (id)",
        "CONSTRAINT u UNIQUE (id)",
        "CONSTRAINT fk FOREIGN KEY (id) REFERENCES other (id)",
    ],
)
def test_table_constraints_in_create_table_are_refused(spark, tmp_path: Path, constraint: str) -> None:
    """Delta keeps no constraint of CREATE TABLE's column list: one dropped silently would let the
    rows through it was meant to refuse (deltamerge created such tables without it). The CHECK
    form names the ways Delta takes one."""
    path = tmp_path / "t"
    with pytest.raises(DeltaMergeError, match="DELTA_UNSUPPORTED_OPERATION") as err:
        deltamerge.sql(spark, f"CREATE TABLE delta.`{path}` (id BIGINT, v BIGINT, {constraint}) USING delta")
    assert ("ADD CONSTRAINT" in str(err.value)) == ("CHECK" in constraint)
    assert not path.exists()


def test_check_constraint_as_a_create_table_property_is_enforced(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    deltamerge.sql(
        spark,
        f"CREATE TABLE delta.`{path}` (id BIGINT, v BIGINT) USING delta "
        "TBLPROPERTIES ('delta.constraints.pos' = 'v >= 0')",
    )
    table = DeltaTable.forPath(spark, path)
    with pytest.raises(DeltaMergeError, match=r"DELTA_VIOLATE_CONSTRAINT_WITH_VALUES.*pos"):
        table.alias("t").merge(
            spark.sql("SELECT 1L AS id, -5L AS v").alias("s"), "t.id = s.id"
        ).whenNotMatchedInsertAll().execute()
    assert table.version() == 0
