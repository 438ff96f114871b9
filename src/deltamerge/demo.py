"""``make demo``: a CDC-style upsert on a bundled sample, printed step by step."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from importlib import resources


def _session():  # type: ignore[no-untyped-def]
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("deltamerge-demo")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def main(path: str | None = None) -> None:
    """Create a customers table, apply a batch of CDC changes with MERGE, print what happened."""
    import deltamerge
    from deltamerge import DeltaTable

    spark = _session()
    root = path or os.path.join(tempfile.gettempdir(), "deltamerge-demo", "customers")
    shutil.rmtree(root, ignore_errors=True)
    data = resources.files("deltamerge") / "data"
    schema = "id INT, name STRING, city STRING, balance DECIMAL(10,2)"
    customers = spark.read.csv(str(data / "customers.csv"), header=True, schema=schema)
    changes = spark.read.csv(str(data / "customer_changes.csv"), header=True, schema=schema + ", op STRING")

    print(f"1. Writing the customers table to {root}")
    deltamerge.write(customers, root)
    table = DeltaTable.forPath(spark, root)
    table.toDF().orderBy("id").show()

    print("2. The change batch (CDC feed):")
    changes.orderBy("id").show()

    print("3. MERGE: update changed customers, delete removed ones, insert new ones")
    start = time.monotonic()
    result = (
        table.alias("t")
        .merge(changes.alias("s"), "t.id = s.id")
        .whenMatchedDelete(condition="s.op = 'DELETE'")
        .whenMatchedUpdate(set={"name": "s.name", "city": "s.city", "balance": "s.balance"})
        .whenNotMatchedInsert(
            condition="s.op = 'UPSERT'",
            values={"id": "s.id", "name": "s.name", "city": "s.city", "balance": "s.balance"},
        )
        .execute()
    )
    elapsed = time.monotonic() - start
    result.show()
    print(f"   (took {elapsed:.1f} s)")

    print("4. The table after the merge:")
    table.toDF().orderBy("id").show()

    print("5. History entry of the merge:")
    last = table.history(1).collect()[0]
    print(f"   version {last['version']}: {last['operation']}")
    for key in ("predicate", "matchedPredicates", "notMatchedPredicates"):
        print(f"   {key}: {last['operationParameters'].get(key)}")
    metrics = last["operationMetrics"]
    for key in sorted(metrics):
        if key.startswith(("numTargetRows", "numSource", "numTargetFiles", "numOutput")):
            print(f"   {key} = {metrics[key]}")
    spark.stop()


if __name__ == "__main__":
    main()
