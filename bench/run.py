"""``python -m bench.run --scale small|full``: generate data, run every scenario three ways, write the report.

One process, one SparkSession (local[2]) shared by deltamerge and the raw-Spark floor; delta-rs runs
in the same process. Each scenario runs ``--reps`` times per engine (interleaved: deltamerge, floor,
delta-rs, deltamerge, ...), every run on a fresh copy of a pristine table, after ``--warmup`` untimed
rounds of the same scenario. The report gives the run with the median wall time.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import sys
import time
from dataclasses import asdict

from bench import data, scenarios, shapes, snapshot_load, write_amp
from bench.measure import load_note, machine_info, measure, median_run
from bench.report import write_report

DEFAULT_ROOT = os.environ.get("DM_BENCH_DIR", "/tmp/deltamerge-bench")

PLANS = {
    # scale name -> (data scales, scenario names per data scale or None for all)
    "tiny": [("tiny", None)],
    "small": [("small", None)],
    "5M": [("5M", None)],  # the acceptance scale alone (what `full` runs first)
    "full": [("5M", None), ("20M", ["upsert_spread", "upsert_one_file"])],
}
# scale name -> size of the table-shape scenarios (bench/shapes.py) run after the scales
SHAPES = {"small": "small", "full": "full"}


def make_session(shuffle_partitions: int):  # type: ignore[no-untyped-def]
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("deltamerge-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", "8g")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
        .config("spark.driver.extraJavaOptions", "-XX:+UseG1GC")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _gc(spark) -> None:  # type: ignore[no-untyped-def]
    # Python's garbage only. A forced JVM GC (System.gc()) before each run made the next small
    # merge ~0.1 s slower (the full collection clears soft-referenced caches and shrinks the heap;
    # A/B, one-file upsert, median of 8: 0.68 vs 0.60 s at 5M, 0.83 vs 0.73 s at 20M), a cost no
    # application that does not force GCs pays; the JVM collects on its own, in every engine's turn.
    gc.collect()


def _planner_settings(spark) -> dict:  # type: ignore[no-untyped-def]
    keys = ("spark.sql.adaptive.enabled", "spark.sql.shuffle.partitions", "spark.sql.autoBroadcastJoinThreshold")
    return {k: spark.conf.get(k, None) for k in keys}


def run_scenario(spark, paths: dict[str, str], work: str, sc: scenarios.Scenario, reps: int, log, warmup: int = 1) -> dict:  # type: ignore[no-untyped-def]
    pristine = paths[sc.target]
    source = paths[f"source_{sc.source}"]
    touched = scenarios.touched_files(spark, pristine, source, sc)
    candidates = scenarios.deltamerge_candidates(spark, pristine, source, sc)
    results: dict[str, list] = {"deltamerge": [], "floor": [], "delta_rs": []}
    facts: dict[str, dict] = {}
    # Untimed warm-up rounds first (rep < 0): every engine runs the scenario once so that JIT
    # compilation, class loading and Spark's code generation for this query shape are not timed.
    for rep in range(-warmup, reps):
        if rep == 0:
            results = {"deltamerge": [], "floor": [], "delta_rs": []}
        base = os.path.join(work, sc.key, str(rep))
        # deltamerge
        dm_table = os.path.join(base, "dm")
        data.clone(pristine, dm_table)
        _gc(spark)
        settings = _planner_settings(spark)
        stats, res = measure(lambda: scenarios.run_deltamerge(spark, dm_table, source, sc), dm_table)
        if _planner_settings(spark) != settings:
            # The engines share the session: a merge that changed it would change the floor's runs.
            raise RuntimeError(f"{sc.key}: the merge changed the session: {settings} -> {_planner_settings(spark)}")
        pruned = res.pop("_pruned")
        f = scenarios.deltamerge_commit_facts(dm_table, candidates, sc.clauses == "insert", pruned)
        stats.files_read, stats.bytes_read = f["files_read"], f["bytes_read"]
        stats.extra = {"result": res, "metrics": f["metrics"]}
        results["deltamerge"].append(stats)
        log(f"  {sc.key} rep {rep} deltamerge {stats.seconds:.2f}s {res}")
        # floor
        out = os.path.join(base, "floor_out")
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        _gc(spark)
        stats, res = measure(lambda: scenarios.run_floor(spark, pristine, touched, source, sc, os.path.join(out, "o")), out)
        stats.files_read, stats.bytes_read = res["files_read"], res["bytes_read"]
        results["floor"].append(stats)
        log(f"  {sc.key} rep {rep} floor {stats.seconds:.2f}s")
        # delta-rs
        rs_table = os.path.join(base, "rs")
        data.clone(pristine, rs_table)
        _gc(spark)
        stats, res = measure(lambda: scenarios.run_delta_rs(rs_table, source, sc), rs_table)
        stats.files_read = res.get("num_target_files_scanned")
        stats.extra = {"metrics": res}
        results["delta_rs"].append(stats)
        log(f"  {sc.key} rep {rep} delta-rs {stats.seconds:.2f}s")
        shutil.rmtree(base, ignore_errors=True)
    facts["touched_files"] = len(touched)
    return {
        "scenario": asdict(sc),
        "key": sc.key,
        "touched_files": len(touched),
        "plan": candidates[2],
        "runs": {k: [asdict(r) for r in v] for k, v in results.items()},
        "median": {k: asdict(median_run(v)) for k, v in results.items()},
    }


def jit_warmup(spark, paths: dict[str, str], work: str, rounds: int, log) -> dict:  # type: ignore[no-untyped-def]
    """Untimed rounds of the one-file upsert (both table modes), deltamerge and the floor in turn,
    so that the JVM's JIT has compiled Spark's planning code before any timed run: in a fresh JVM
    a small merge (and the floor's small job) keeps getting faster for its first ~15 runs, which
    would otherwise be charged to whichever scenario happens to run first. Returns the first and
    last rounds' times (kept in the report)."""
    times: dict[str, list[float]] = {}
    for sc in scenarios.all_scenarios(["upsert_one_file"]):
        pristine, source = paths[sc.target], paths[f"source_{sc.source}"]
        touched = scenarios.touched_files(spark, pristine, source, sc)
        for _ in range(max(1, rounds)):
            warm = os.path.join(work, "warmup")
            data.clone(pristine, warm)
            t0 = time.perf_counter()
            scenarios.run_deltamerge(spark, warm, source, sc)
            times.setdefault(f"deltamerge {sc.key}", []).append(time.perf_counter() - t0)
            shutil.rmtree(warm, ignore_errors=True)
            out = os.path.join(work, "warmup_floor")
            shutil.rmtree(out, ignore_errors=True)
            os.makedirs(out)
            t0 = time.perf_counter()
            scenarios.run_floor(spark, pristine, touched, source, sc, os.path.join(out, "o"))
            times.setdefault(f"floor {sc.key}", []).append(time.perf_counter() - t0)
            shutil.rmtree(out, ignore_errors=True)
    summary = {k: {"rounds": len(v), "first": round(v[0], 3), "last3": round(sorted(v[-3:])[1] if len(v) >= 3 else v[-1], 3)} for k, v in times.items()}
    log(f"JIT warm-up: {summary}")
    return summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--scale", choices=sorted(PLANS), default="small")
    # The acceptance scales take 5 runs: single runs of the 5M copy-on-write upsert vary by ±10% on a
    # 2-core machine, enough to move its ratio to the floor across the target.
    ap.add_argument("--reps", type=int, default=None, help="timed runs per engine (default: 5 for 5M/full, 3 otherwise)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed rounds per scenario before the timed ones")
    ap.add_argument("--jit-warmup", type=int, default=12, help="untimed one-file merges per table mode (deltamerge and floor) before the first scenario of each scale")
    ap.add_argument("--root", default=DEFAULT_ROOT, help="where generated data and run copies live")
    ap.add_argument("--only", nargs="*", help="scenario names to run (default: all of the scale)")
    ap.add_argument("--skip-snapshot", action="store_true")
    ap.add_argument("--skip-shapes", action="store_true", help="skip the table-shape scenarios (bench/shapes.py)")
    ap.add_argument("--skip-amp", action="store_true")
    ap.add_argument("--note", help="run conditions to print in the report (e.g. a shared, loaded machine)")
    ap.add_argument("--output", help="report path (default: BENCHMARKS.md for full, <root>/BENCHMARKS-small.md for small)")
    args = ap.parse_args(argv)
    if args.reps is None:
        args.reps = 5 if args.scale in ("5M", "full") else 3
    if args.reps < 3:
        print("note: fewer than 3 repetitions; the report's medians are not the acceptance numbers", file=sys.stderr)

    os.makedirs(args.root, exist_ok=True)
    t_start = time.time()

    def log(msg: str) -> None:
        print(f"[{time.time() - t_start:7.1f}s] {msg}", flush=True)

    output = args.output or ("BENCHMARKS.md" if args.scale in ("full", "5M") else os.path.join(args.root, "BENCHMARKS-small.md"))
    report: dict = {"scale": args.scale, "reps": args.reps, "warmup": args.warmup, "jit_warmup": args.jit_warmup, "machine": machine_info(), "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "scales": [], "conditions": args.note}
    plan = PLANS[args.scale]
    shuffle = 8 if args.scale in ("tiny", "small") else 16
    spark = make_session(shuffle)
    report["spark_conf"] = {
        k: spark.conf.get(k)
        for k in ("spark.master", "spark.driver.memory", "spark.sql.shuffle.partitions", "spark.sql.adaptive.enabled")
    }
    try:
        for scale_name, names in plan:
            scale = data.SCALES[scale_name]
            if args.only:
                names = [n for n in (names or args.only) if n in args.only]
                if not names or not scenarios.all_scenarios(names):
                    continue  # nothing of this scale asked for (an empty list would mean all)
            needed = {"target_dv", "source_dv_1pct"} if not args.skip_amp else set()
            for sc in scenarios.all_scenarios(names):
                needed |= {sc.target, f"source_{sc.source}"}
            needed |= {"target", "target_dv", "source_upsert_one_file"}  # warm-up
            log(f"scale {scale_name}: preparing data under {args.root}")
            with load_note() as ln:
                paths = data.prepare(spark, args.root, scale, needed)
            log(f"data ready (load {ln['before']:.2f} -> {ln['after']:.2f})")
            work = os.path.join(args.root, "work")
            entry: dict = {"scale": asdict(scale), "scenarios": []}
            # JVM warm-up (JIT compilation of Spark's planner, class loading), before any timing.
            entry["jit_warmup"] = jit_warmup(spark, paths, work, args.jit_warmup, log)
            for sc in scenarios.all_scenarios(names):
                _run_into(entry, report, spark, paths, work, sc, args, log)
            if not args.skip_amp:
                log("write amplification (DV, 1% of rows)")
                entry["write_amp"] = write_amp.run(spark, paths, scale, work)
                log(f"  {entry['write_amp']}")
            report["scales"].append(entry)
            _save(report, None, args.root)
        size = SHAPES.get(args.scale)
        if size and not args.skip_shapes:
            log(f"table shapes ({size}): preparing data under {args.root}")
            with load_note() as ln:
                shape_list, paths = shapes.prepare(spark, args.root, size)
            log(f"data ready (load {ln['before']:.2f} -> {ln['after']:.2f})")
            entry = {"scale": {"name": f"shapes ({size})"}, "shapes": True, "scenarios": []}
            for sc in shape_list:
                if not args.only or sc.name in args.only:
                    _run_into(entry, report, spark, paths, os.path.join(args.root, "work"), sc, args, log)
            report["scales"].append(entry)
            _save(report, None, args.root)
        if not args.skip_snapshot:
            commits = 10_000
            log_path = os.path.join(args.root, f"log_{commits}")
            log("snapshot load: generating log (10k commits / 100k files, checkpoint every 10)")
            snapshot_load.generate(log_path, commits=commits)
            log("snapshot load: timing")
            with load_note() as ln:
                report["snapshot"] = snapshot_load.time_loads(log_path, reps=max(5, args.reps))
            report["snapshot"]["load"] = ln
            log(f"  {report['snapshot']}")
    finally:
        spark.stop()
    report["finished"] = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    report["wall_minutes"] = (time.time() - t_start) / 60
    _save(report, None, args.root)
    write_report(report, output)
    log(f"wrote {output}")
    return 0


def _run_into(entry: dict, report: dict, spark, paths: dict[str, str], work: str, sc: scenarios.Scenario, args, log) -> None:  # type: ignore[no-untyped-def]
    """One scenario's runs, with the machine load around them, added to ``entry`` and saved."""
    with load_note() as ln:
        res = run_scenario(spark, paths, work, sc, args.reps, log, args.warmup)
    res["load"] = ln
    entry["scenarios"].append(res)
    _save(report, entry, args.root)


def _save(report: dict, partial: dict | None, root: str) -> None:
    body = dict(report)
    if partial is not None:
        body = {**report, "scales": [*report["scales"], partial]}
    with open(os.path.join(root, f"results-{report['scale']}.json"), "w") as f:
        json.dump(body, f, indent=1, default=str)


if __name__ == "__main__":
    raise SystemExit(main())
