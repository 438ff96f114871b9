"""Write amplification of a DV-mode upsert touching 1% of the rows.

On the DV-enabled pristine target (>= 1M rows in >= 10 files) an upsert whose source updates 1% of
the rows, spread over all files, runs through deltamerge. Its new data files hold exactly the
changed rows; the baseline is those same rows written on their own, as one file, by the same Spark
Parquet writer (``deltamerge.spark.write.write_parquet``). The ratio is new data bytes / baseline
bytes (deletion-vector files reported separately).
"""

from __future__ import annotations

import os
import shutil

from bench import data, scenarios
from bench.measure import list_files


def run(spark, paths: dict[str, str], scale: data.Scale, work: str) -> dict:  # type: ignore[no-untyped-def]
    from deltamerge.spark.write import write_parquet

    table = os.path.join(work, "write_amp", "dm")
    data.clone(paths["target_dv"], table)
    before = list_files(table)
    sc = scenarios.Scenario("dv_1pct", "DV upsert of 1% rows", "dv_1pct", "upsert", "t.id = s.id", dv=True)
    result = scenarios.run_deltamerge(spark, table, paths["source_dv_1pct"], sc)
    new = {k: v for k, v in list_files(table).items() if k not in before}
    data_files = {k: v for k, v in new.items() if k.endswith(".parquet") and not k.startswith("_delta_log")}
    dv_files = {k: v for k, v in new.items() if k.endswith(".bin")}
    changed = spark.read.parquet(*[os.path.join(table, k) for k in data_files])
    n_rows = changed.count()
    base_dir = os.path.join(work, "write_amp", "baseline")
    shutil.rmtree(base_dir, ignore_errors=True)
    os.makedirs(base_dir)
    written = write_parquet(changed.coalesce(1), base_dir, [])
    baseline = sum(w.size for w in written)
    out = {
        "target_rows": scale.target_rows,
        "target_files": scale.target_files,
        "changed_rows": n_rows,
        "result": result,
        "new_data_files": len(data_files),
        "new_data_bytes": sum(data_files.values()),
        "dv_files": len(dv_files),
        "dv_bytes": sum(dv_files.values()),
        "baseline_files": len(written),
        "baseline_bytes": baseline,
    }
    out["ratio"] = out["new_data_bytes"] / baseline if baseline else None
    out["ratio_with_dvs"] = (out["new_data_bytes"] + out["dv_bytes"]) / baseline if baseline else None
    shutil.rmtree(os.path.join(work, "write_amp"), ignore_errors=True)
    return out
