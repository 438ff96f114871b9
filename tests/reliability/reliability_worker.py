"""A writer process of the reliability tests: ``python reliability_worker.py <config.json>``.

Roles: ``spark`` (its own local SparkSession: MERGE and append through deltamerge), ``log``
(pure log layer: appends and deletes committed through ``OptimisticTransaction``) and ``rs``
(another engine on the same log: MERGE, append and predicate delete through delta-rs). The writer runs
the operations of :func:`reliability_helpers.plan_op` in order until its deadline (or until it is
killed) and journals every attempt as one JSON line: ``start``, then ``done`` (with the committed
version), ``conflict`` (a ``ConcurrentModificationError``, or delta-rs's ``CommitFailedError``,
retried up to ``app_retries`` times), ``skip`` (nothing to delete) or ``error`` (anything else:
the tests fail on it).

Config keys: role, w, tables, seed, journal, ready (file to create once warmed up), go (file to
wait for; it holds the unix time the run starts; optional), duration, app_retries, own, pause,
warm_merge (one MERGE into a scratch table before the ready file), min_commits and overtime
(keep going past the deadline, for at most ``overtime`` s, until the writer has committed
``min_commits`` operations).
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
import traceback
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/

import reliability_helpers as h
from deltalake.exceptions import CommitFailedError

from deltamerge.errors import ConcurrentModificationError
from deltamerge.log.snapshot import DeltaLog
from spark_settings import interpreted_settings


class Journal:
    def __init__(self, path: str) -> None:
        self.fh = open(path, "a", encoding="utf-8")  # noqa: SIM115

    def write(self, **event: Any) -> None:
        event["t"] = time.time()
        self.fh.write(json.dumps(event) + "\n")
        self.fh.flush()


def spark_session():  # type: ignore[no-untyped-def]
    import warnings

    warnings.filterwarnings("ignore")
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    for key, value in interpreted_settings().items():  # as the test session (tests/spark_settings.py)
        builder = builder.config(key, value)
    spark = (
        builder.master("local[1]")
        .appName("deltamerge-reliability-writer")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.default.parallelism", "1")
        .config("spark.driver.memory", "768m")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
        .config("spark.sql.adaptive.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("OFF")
    return spark


def spark_merge(spark, root: str, plan: h.OpPlan) -> int | None:  # type: ignore[no-untyped-def]
    from deltamerge import DeltaTable

    rows = [(*r, k) for r, k in zip(plan.rows, plan.merge_kinds, strict=True)]
    source = spark.createDataFrame(rows, h.DDL + ", kind string")
    app_id = f"{h.APP_ID_PREFIX}{plan.w}"
    spark.conf.set("spark.databricks.delta.write.txnAppId", app_id)
    spark.conf.set("spark.databricks.delta.write.txnVersion", str(plan.op))
    try:
        (
            DeltaTable.forPath(spark, root)
            .alias("t")
            .merge(source.alias("s"), f"t.p = '{plan.part}' AND t.id = s.id")
            .whenMatchedDelete("s.kind = 'D'")
            .whenMatchedUpdate(set={"w": "s.w", "op": "s.op", "val": "s.val"})
            .whenNotMatchedInsert("s.kind = 'U'", values={c: f"s.{c}" for c in ("id", "w", "op", "val", "p")})
            .execute()
        )
    finally:
        spark.conf.unset("spark.databricks.delta.write.txnAppId")
        spark.conf.unset("spark.databricks.delta.write.txnVersion")
    # The version that holds this merge's txn action (searched from the newest).
    log = DeltaLog.for_table(root)
    latest = log.update().version
    for v in range(latest, max(0, latest - 500), -1):
        for a in log.read_commit(v):
            if getattr(a, "app_id", None) == app_id and getattr(a, "version", None) == plan.op:
                return v
    return None


def spark_append(spark, root: str, plan: h.OpPlan) -> int | None:  # type: ignore[no-untyped-def]
    import deltamerge

    df = spark.createDataFrame(list(plan.rows), h.DDL).coalesce(1)
    return deltamerge.write(df, root, mode="append")


def _version_with_metadata(root: str, plan: h.OpPlan) -> int | None:
    """The version whose ``userMetadata`` names ``plan`` (searched from the newest), None if none."""
    log = DeltaLog(root)
    latest = log.latest_version()
    for v in range(latest, max(0, latest - 500), -1):
        info = next(a for a in log.read_commit(v) if type(a).__name__ == "CommitInfo")
        meta = info.raw.get("userMetadata")
        if meta and json.loads(meta).get("w") == plan.w and json.loads(meta).get("op") == plan.op:
            return v
    return None


def rs_write(root: str, plan: h.OpPlan) -> int | None:
    """A delta-rs MERGE (the clauses of :func:`spark_merge`), append or predicate delete; None when
    nothing was committed."""
    import pyarrow as pa
    from deltalake import CommitProperties, DeltaTable, write_deltalake

    props = CommitProperties(custom_metadata={"userMetadata": json.dumps({**plan.to_json(), "ids": []})})
    cols = ["id", "w", "op", "val", "p"]
    schema = pa.schema([*h.DATA_SCHEMA, pa.field("p", pa.string())])
    table = pa.Table.from_pylist([dict(zip(cols, r, strict=True)) for r in plan.rows], schema=schema)
    if plan.kind == "merge":
        source = table.append_column("kind", pa.array(plan.merge_kinds, pa.string()))
        (
            DeltaTable(root)
            .merge(
                source,
                f"t.p = '{plan.part}' AND t.id = s.id",
                source_alias="s",
                target_alias="t",
                commit_properties=props,
            )
            .when_matched_delete("s.kind = 'D'")
            .when_matched_update({"w": "s.w", "op": "s.op", "val": "s.val"})
            .when_not_matched_insert({c: f"s.{c}" for c in cols}, "s.kind = 'U'")
            .execute()
        )
    elif plan.kind == "append":
        write_deltalake(root, table, mode="append", partition_by=["p"], commit_properties=props)
    else:
        DeltaTable(root).delete(plan.predicate, commit_properties=props)
    return _version_with_metadata(root, plan)


def fixed_append(cfg: dict[str, Any]) -> h.OpPlan:
    """The append of role ``append_once``: 3 rows into ``cfg['part']`` of the first table."""
    rows = h.fixed_rows(cfg["w"], cfg["part"], cfg["seed"])
    return h.OpPlan(cfg["w"], 0, "append", 0, cfg["part"], tuple(rows))


def main(config_path: str) -> int:
    with open(config_path, encoding="utf-8") as fh:
        cfg = json.load(fh)
    role, w, tables, seed = cfg["role"], cfg["w"], cfg["tables"], cfg["seed"]
    journal = Journal(cfg["journal"])
    if role == "append_once":
        # One log-layer append of fixed rows (fault-injection tests): exit 0 only if nothing killed us.
        plan = fixed_append(cfg)
        journal.write(ev="start", **plan.to_json(), attempt=0)
        version = h.log_append(tables[plan.table], plan)
        journal.write(ev="done", **plan.to_json(), attempt=0, version=version)
        return 0
    spark = spark_session() if role == "spark" else None
    if spark is not None:
        # Warm up the JVM (first job, first Parquet read) before the clock starts.
        spark.createDataFrame([(1,)], "x long").collect()
        import deltamerge

        deltamerge.read(spark, tables[0]).limit(1).collect()
        if cfg.get("warm_merge"):
            # A first MERGE generates and compiles its code: seconds on a busy machine, which
            # would otherwise be spent inside the run (and lose races for it).
            scratch = os.path.join(os.path.dirname(cfg["journal"]), f"warm-{w}")
            rows = spark.createDataFrame(h.initial_rows(["warm"]), h.DDL)
            deltamerge.write(rows, scratch, mode="overwrite")
            warm = next(p for i in range(1000) if (p := h.plan_op(seed, w, i, 1, "warm")).kind == "merge")
            spark_merge(spark, scratch, warm)
    with open(cfg["ready"], "w") as fh:
        fh.write(str(os.getpid()))
    deadline = time.time() + cfg.get("duration", 3600)
    if cfg.get("go"):
        while not os.path.exists(cfg["go"]):
            time.sleep(0.02)
        time.sleep(0.05)
        with open(cfg["go"]) as fh:
            deadline = float(fh.read().strip() or time.time()) + cfg["duration"]
    journal.write(ev="begin", w=w, pid=os.getpid())
    pause = float(cfg.get("pause", 0.0))
    # Optimistic concurrency lets a slow writer lose every race while fast ones keep committing
    # (a legitimate conflict each time). Past the deadline, when the others are done, a writer with
    # fewer than ``min_commits`` commits keeps going (up to ``overtime`` s) so the run shows that it
    # can commit at all, rather than how lucky it was on a slow machine.
    min_commits = int(cfg.get("min_commits", 0))
    hard_deadline = deadline + float(cfg.get("overtime", 0.0))
    committed = 0
    op = 0
    while time.time() < deadline or (committed < min_commits and time.time() < hard_deadline):
        plan = h.plan_op(seed, w, op, len(tables), cfg.get("own"))
        root = tables[plan.table]
        for attempt in range(int(cfg.get("app_retries", 3))):
            journal.write(ev="start", **plan.to_json(), attempt=attempt)
            try:
                if role == "rs":
                    version = rs_write(root, plan)
                    if version is None:
                        journal.write(ev="skip", **plan.to_json(), attempt=attempt)
                        break
                elif plan.kind == "merge":
                    version = spark_merge(spark, root, plan)
                elif plan.kind == "append" and role == "spark":
                    version = spark_append(spark, root, plan)
                elif plan.kind == "append":
                    version = h.log_append(root, plan)
                else:
                    version = h.log_delete(root, plan, random.Random(f"{seed}/{w}/{op}/{attempt}"))
                    if version is None:
                        journal.write(ev="skip", **plan.to_json(), attempt=attempt)
                        break
            except (ConcurrentModificationError, CommitFailedError) as e:
                journal.write(
                    ev="conflict",
                    **plan.to_json(),
                    attempt=attempt,
                    cls=type(e).__name__,
                    error_class=getattr(e, "error_class", None),
                    message=str(e)[:1500],
                )
                continue
            except Exception as e:
                journal.write(
                    ev="error",
                    **plan.to_json(),
                    attempt=attempt,
                    cls=type(e).__name__,
                    message=str(e)[:2000],
                    trace=traceback.format_exc()[-4000:],
                )
                break
            journal.write(ev="done", **plan.to_json(), attempt=attempt, version=version)
            committed += 1
            break
        op += 1
        if pause:
            time.sleep(random.Random(f"{seed}/{w}/{op}/pause").uniform(0, pause))
    journal.write(ev="end", w=w, ops=op)
    if spark is not None:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
