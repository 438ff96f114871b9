"""Overhead of ``format("delta")`` (deltamerge.configure) against deltamerge's direct API.

    python -m bench.facade_overhead [--connect] [--rows 1000] [--reps 9] [--out FILE.md]

Each pair runs interleaved in ABBA order (facade, direct, direct, facade, ...) on the same small
table and the median of each side is reported. Plan-only rows build the DataFrame without running a Spark job:
they isolate the facade's own cost (option parsing, state lookup) from Spark's. Pass-through rows
measure what the interception costs formats other than delta, with the facade on and off.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any


def _session(connect: bool):  # type: ignore[no-untyped-def]
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    conf = SparkConf().setMaster("local[2]").setAppName("deltamerge-facade-bench")
    conf.set("spark.ui.enabled", "false").set("spark.ui.showConsoleProgress", "false")
    conf.set("spark.sql.shuffle.partitions", "2").set("spark.sql.session.timeZone", "UTC")
    if connect:
        # A local Connect server on a free loopback port (remote("local") always takes 15002).
        conf.set("spark.plugins", "org.apache.spark.sql.connect.SparkConnectPlugin")
        conf.set("spark.connect.grpc.binding.address", "127.0.0.1")
        conf.set("spark.connect.grpc.binding.port", "0")
    sc = SparkContext.getOrCreate(conf)
    sc.setLogLevel("ERROR")
    classic = SparkSession(sc)
    if not connect:
        return classic
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    service = getattr(classic._jvm, "org.apache.spark.sql.connect.service.SparkConnectService$")
    port = getattr(service, "MODULE$").localPort()
    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"  # pyspark.sql.functions build Connect Columns
    return ConnectSession.builder.remote(f"sc://127.0.0.1:{port}").getOrCreate()


def _time(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def _pair(reps: int, a: Callable[[], Any], b: Callable[[], Any], warmup: int = 1) -> tuple[float, float]:
    for _ in range(warmup):
        a()
        b()
    ta, tb = [], []
    for i in range(reps):  # ABBA order: neither side always runs right after the other
        if i % 2 == 0:
            ta.append(_time(a))
            tb.append(_time(b))
        else:
            tb.append(_time(b))
            ta.append(_time(a))
    return statistics.median(ta), statistics.median(tb)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--connect", action="store_true", help="Spark Connect (remote local[2]).")
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--reps", type=int, default=9)
    parser.add_argument("--out", help="Also write the markdown table to this file.")
    args = parser.parse_args(argv)

    import deltamerge

    spark = _session(args.connect)
    work = tempfile.mkdtemp(prefix="dm-facade-bench-")
    path = os.path.join(work, "t")
    plain = os.path.join(work, "plain")
    load_before = os.getloadavg()[0]
    try:
        df = spark.range(args.rows).selectExpr("id", "cast(id % 7 as int) as k", "cast(id as string) as s")
        deltamerge.write(df, path, configuration={"delta.enableChangeDataFeed": "true"})
        df.write.mode("overwrite").parquet(plain)
        deltamerge.configure(spark)
        rows: list[tuple[str, float, float]] = []

        def add(name: str, facade: Callable[[], Any], direct: Callable[[], Any], reps: int) -> None:
            f, d = _pair(reps, facade, direct)
            rows.append((name, f, d))
            print(f"{name:55s} facade {f:9.2f} ms   direct {d:9.2f} ms", file=sys.stderr)

        many = args.reps * 5
        add(
            "read, plan only: load(path) vs read(spark, path)",
            lambda: spark.read.format("delta").load(path),
            lambda: deltamerge.read(spark, path),
            many,
        )
        add(
            "time travel, plan only: versionAsOf vs read(version=)",
            lambda: spark.read.format("delta").option("versionAsOf", 0).load(path),
            lambda: deltamerge.read(spark, path, version=0),
            many,
        )
        add(
            "change feed, plan only: readChangeFeed vs read_changes",
            lambda: spark.read.format("delta").options(readChangeFeed="true", startingVersion=0).load(path),
            lambda: deltamerge.read_changes(spark, path, 0),
            many,
        )
        add(
            "read + count()",
            lambda: spark.read.format("delta").load(path).count(),
            lambda: deltamerge.read(spark, path).count(),
            args.reps,
        )
        add(
            "read + count(): direct vs direct (A/A noise floor)",
            lambda: deltamerge.read(spark, path).count(),
            lambda: deltamerge.read(spark, path).count(),
            args.reps,
        )
        add(
            f"append {args.rows} rows: save() vs write(mode='append')",
            lambda: df.write.format("delta").mode("append").save(path),
            lambda: deltamerge.write(df, path, mode="append"),
            args.reps,
        )

        # The facade's own cost: deltamerge's I/O replaced by stubs, so only the dispatch remains
        # (reader/writer state, option parsing, session settings lookups, the table-exists check).
        import deltamerge.cdf_read
        import deltamerge.io

        real = (deltamerge.io.write, deltamerge.io.read, deltamerge.cdf_read.read_changes)

        def stub(*_a: Any, **_k: Any) -> int:
            return 0

        deltamerge.io.write = deltamerge.io.read = deltamerge.cdf_read.read_changes = stub  # type: ignore[assignment]
        try:
            add(
                "dispatch only: append save() vs write() (I/O stubbed)",
                lambda: df.write.format("delta").mode("append").save(path),
                lambda: stub(df, path, "append"),
                many * 4,
            )
            add(
                "dispatch only: load() vs read() (I/O stubbed)",
                lambda: spark.read.format("delta").option("versionAsOf", 0).load(path),
                lambda: stub(spark, path, version=0),
                many * 4,
            )
        finally:
            deltamerge.io.write, deltamerge.io.read, deltamerge.cdf_read.read_changes = real

        # Pass-through: other formats with the facade on vs off (configure is reversible).
        def plain_read() -> Any:
            return spark.read.format("parquet").load(plain)

        def toggled(fn: Callable[[], Any]) -> Callable[[], Any]:
            def run() -> Any:
                deltamerge.unconfigure()
                try:
                    return _time(fn)
                finally:
                    deltamerge.configure(spark)

            return run

        on, off = [], []
        for i in range(many):
            if i % 2:
                off.append(toggled(plain_read)())
            on.append(_time(plain_read))
            if not i % 2:
                off.append(toggled(plain_read)())
        name = "parquet read, plan only: facade on vs off"
        rows.append((name, statistics.median(on), statistics.median(off)))

        def chain() -> Any:
            return spark.read.format("parquet").option("mergeSchema", "false").option("pathGlobFilter", "*")

        on, off = [], []
        for _ in range(many * 4):
            on.append(_time(chain))
            off.append(toggled(chain)())
        name = "reader.format().option().option(): facade on vs off"
        rows.append((name, statistics.median(on), statistics.median(off)))
    finally:
        deltamerge.unconfigure()
        shutil.rmtree(work, ignore_errors=True)
    load_after = os.getloadavg()[0]

    kind = "Spark Connect (local server, local[2])" if args.connect else "classic local[2]"
    lines = [
        f"Session: {kind}; table of {args.rows} rows; medians of {args.reps} (actions) or "
        f"{args.reps * 5} (plan-only) interleaved runs; load average {load_before:.1f} -> {load_after:.1f} "
        f"on {os.cpu_count()} CPUs.",
        "",
        "| operation | facade (ms) | direct / off (ms) | overhead (ms) | overhead |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, f, d in rows:
        pct = f"{(f - d) / d * 100:+.0f}%" if d >= 0.05 else "n/a (stub)"
        lines.append(f"| {name} | {f:.2f} | {d:.2f} | {f - d:+.2f} | {pct} |")
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
