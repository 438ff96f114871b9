"""The maintenance statements of ``deltamerge.sql``: DESCRIBE HISTORY / DETAIL, VACUUM, RESTORE,
OPTIMIZE, REORG, CONVERT TO DELTA, GENERATE and SHALLOW CLONE (regular-expression fronts: sqlglot
does not parse them). ``HANDLERS`` pairs each pattern with its handler."""

from __future__ import annotations

import re
from collections.abc import Callable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import DataType, LongType, StructField, StructType

from deltamerge.errors import AnalysisError, ParseError, TableNotFoundError, UnsupportedOperationError
from deltamerge.identifiers import QUALIFIED
from deltamerge.identifiers import unquote as _unquote
from deltamerge.log.paths import table_root
from deltamerge.log.snapshot import DeltaLog
from deltamerge.spark.types import quote_name
from deltamerge.sql_common import (
    FLAGS,
    TABLE_REF,
    delta_table,
    empty_frame,
    parse_properties,
    resolve_table,
    table_reference,
)

__all__ = ["HANDLERS"]

_HISTORY = re.compile(rf"(?:DESC|DESCRIBE)\s+HISTORY\s+{TABLE_REF}(?:\s+LIMIT\s+(?P<limit>\d+))?", FLAGS)
_DETAIL = re.compile(rf"(?:DESC|DESCRIBE)\s+DETAIL\s+{TABLE_REF}", FLAGS)
_VACUUM = re.compile(
    rf"VACUUM\s+{TABLE_REF}(?P<mods>(?:\s+(?:LITE|FULL|RETAIN\s+[0-9.]+\s+HOURS?|DRY\s+RUN))*)", FLAGS
)
# Delta's vacuum modifiers come in any order, each at most once.
_VACUUM_MOD = re.compile(
    r"(?P<mode>LITE|FULL)|RETAIN\s+(?P<hours>[0-9.]+)\s+HOURS?|(?P<dry>DRY\s+RUN)", FLAGS
)
_RESTORE = re.compile(
    rf"RESTORE\s+(?:TABLE\s+)?{TABLE_REF}\s+(?:TO\s+)?(?P<kind>VERSION|TIMESTAMP)\s+AS\s+OF\s+(?P<value>.+)",
    FLAGS,
)
_OPTIMIZE = re.compile(
    rf"OPTIMIZE\s+{TABLE_REF}(?P<full>\s+FULL)?(?:\s+WHERE\s+(?P<where>.+?))?(?P<zorder>\s+ZORDER\s+BY\s+.+)?",
    FLAGS,
)
_REORG = re.compile(
    rf"REORG\s+TABLE\s+{TABLE_REF}(?:\s+WHERE\s+(?P<where>.+?))?\s+APPLY\s*\(\s*(?P<apply>.+?)\s*\)", FLAGS
)
_CONVERT = re.compile(
    rf"CONVERT\s+TO\s+DELTA\s+(?P<table>{QUALIFIED})"
    r"(?P<nostats>\s+NO\s+STATISTICS)?(?:\s+PARTITIONED\s+BY\s*\((?P<parts>.*)\))?",
    FLAGS,
)
_GENERATE = re.compile(rf"GENERATE\s+(?P<mode>\w+|`(?:[^`]|``)+`)\s+FOR\s+TABLE\s+{TABLE_REF}", FLAGS)
_CLONE = re.compile(
    r"(?P<head>CREATE\s+OR\s+REPLACE\s+TABLE|REPLACE\s+TABLE|CREATE\s+TABLE(?P<ine>\s+IF\s+NOT\s+EXISTS)?)\s+"
    + TABLE_REF.replace("?P<table>", "?P<target>")
    + r"\s+(?P<kind>SHALLOW\s+|DEEP\s+)?CLONE\s+"
    + TABLE_REF.replace("?P<table>", "?P<source>")
    + r"(?:\s+(?P<tt>VERSION|TIMESTAMP)\s+AS\s+OF\s+(?P<when>\d+|'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"))?"
    + r"(?:\s+TBLPROPERTIES\s*\((?P<props>.*?)\))?"
    + r"(?:\s+LOCATION\s+(?P<location>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"))?",
    FLAGS,
)


def _history(spark: SparkSession, m: re.Match[str]) -> DataFrame:
    limit = m.group("limit")
    return delta_table(spark, m.group("table")).history(int(limit) if limit else None)


def _detail(spark: SparkSession, m: re.Match[str]) -> DataFrame:
    return delta_table(spark, m.group("table")).detail()


def _vacuum(spark: SparkSession, m: re.Match[str]) -> DataFrame:
    from deltamerge.io import snapshot_for
    from deltamerge.spark.session import conf_getter
    from deltamerge.vacuum import vacuum_table

    mode = hours = None
    dry = False
    seen: set[str] = set()
    for mod in _VACUUM_MOD.finditer(m.group("mods")):
        clause = "LITE/FULL" if mod.group("mode") else "RETAIN" if mod.group("hours") else "DRY RUN"
        if clause in seen:
            raise ParseError(
                f"Found duplicate clauses: {clause}. Please, remove one of them.",
                error_class="DUPLICATE_CLAUSES",
            )
        seen.add(clause)
        mode = mod.group("mode") or mode
        hours = mod.group("hours") or hours
        dry = dry or bool(mod.group("dry"))
    path, _ = resolve_table(m.group("table"))
    retention = float(hours) if hours is not None else None
    lite = None if mode is None else mode.upper() == "LITE"
    deleted = vacuum_table(snapshot_for(path), retention, conf_getter(spark), dry_run=dry, lite=lite)
    return spark.createDataFrame([(p,) for p in deleted], "path string")


def _generate(spark: SparkSession, m: re.Match[str]) -> DataFrame:
    delta_table(spark, m.group("table")).generate(_unquote(m.group("mode")))
    return empty_frame(spark)


def _clone(spark: SparkSession, m: re.Match[str]) -> DataFrame:
    from deltamerge.builders.cloning import CLONE_METRICS, clone_to

    head = " ".join(m.group("head").upper().split())
    mode = (
        "createOrReplace"
        if head.startswith("CREATE OR")
        else "replace"
        if head.startswith("REPLACE")
        else ("createIfNotExists" if m.group("ine") else "create")
    )
    source_path, source_name = resolve_table(m.group("source"))
    location = _unquote(m.group("location")) if m.group("location") else None
    target_path, target_parts = table_reference(m.group("target"))
    if target_path is not None:
        target = target_path
        if location is not None and table_root(location) != table_root(target):
            raise AnalysisError(
                f"Two paths were provided as the CLONE target so it is ambiguous which to use: {location} "
                f"and {target}. Give only one.",
                error_class="DELTA_CLONE_AMBIGUOUS_TARGET",
            )
    else:
        target = ".".join(target_parts)
    when = m.group("when")
    version = int(when) if when is not None and m.group("tt").upper() == "VERSION" else None
    timestamp = _unquote(when) if when is not None and version is None else None
    props = parse_properties(m.group("props"), keys_only=False) if m.group("props") else None
    before = table_root(location) if location is not None and target_path is None else None
    _, metrics = clone_to(
        spark,
        source_path,
        source_name,
        target,
        shallow=(m.group("kind") or "").strip().upper() == "SHALLOW",
        mode=mode,
        properties=props,
        version=version,
        timestamp=timestamp,
        location=before,
    )
    schema = StructType([StructField(col, LongType()) for col, _ in CLONE_METRICS])
    rows = [] if metrics is None else [tuple(metrics[key] for _, key in CLONE_METRICS)]
    return spark.createDataFrame(rows, schema)


def _restore(spark: SparkSession, m: re.Match[str]) -> DataFrame:
    from deltamerge.builders import restore

    table = delta_table(spark, m.group("table"))
    value = m.group("value").strip()
    if m.group("kind").upper() == "VERSION":
        if not re.fullmatch(r"\d+", value):
            raise ParseError(f"RESTORE ... VERSION AS OF expects a version number, got {value!r}.")
        return restore(spark, table.path, version=int(value))
    if value[:1] not in "'\"":
        raise ParseError(f"RESTORE ... TIMESTAMP AS OF expects a timestamp string, got {value!r}.")
    return restore(spark, table.path, timestamp=_unquote(value))


def _optimize(spark: SparkSession, m: re.Match[str]) -> DataFrame:
    from deltamerge.builders import optimize

    where = m.group("where")
    zorder: list[str] = []
    if m.group("zorder"):
        text = re.sub(r"^\s*ZORDER\s+BY\s*", "", m.group("zorder"), flags=re.IGNORECASE).strip()
        if text.startswith("(") and text.endswith(")"):
            text = text[1:-1]
        # Commas outside backticks separate the columns.
        zorder = [c.strip() for c in re.split(r",(?=(?:[^`]*`[^`]*`)*[^`]*$)", text)]
        if not all(re.fullmatch(QUALIFIED, c) for c in zorder):
            raise ParseError(
                f"Syntax error in ZORDER BY: {m.group('zorder').strip()!r}; expected column names.",
                error_class="PARSE_SYNTAX_ERROR",
            )
    path = delta_table(spark, m.group("table")).path
    return optimize(spark, path, [where] if where else [], zorder_by=zorder, full=bool(m.group("full")))


def _reorg(spark: SparkSession, m: re.Match[str]) -> DataFrame:
    from deltamerge.builders import optimize

    if not re.fullmatch(r"PURGE", m.group("apply"), re.IGNORECASE):
        raise UnsupportedOperationError(
            f"REORG TABLE ... APPLY ({m.group('apply')}) is not implemented by deltamerge; APPLY (PURGE) is.",
            error_class="DELTA_UNSUPPORTED_OPERATION",
        )
    where = m.group("where")
    return optimize(spark, delta_table(spark, m.group("table")).path, [where] if where else [], purge=True)


def _convert(spark: SparkSession, m: re.Match[str]) -> DataFrame:
    from deltamerge.convert import convert_identifier

    schema = None
    if m.group("parts") is not None:
        try:
            parsed = DataType.fromDDL(m.group("parts"))
        except Exception as e:
            raise ParseError(f"Cannot parse PARTITIONED BY ({m.group('parts')}): {e}") from None
        if not isinstance(parsed, StructType):
            raise ParseError(f"PARTITIONED BY expects `column type` pairs, got ({m.group('parts')}).")
        schema = parsed
    convert_identifier(spark, m.group("table"), schema, collect_stats=not m.group("nostats"))
    return empty_frame(spark)


_Handler = Callable[[SparkSession, re.Match[str]], DataFrame | None]


def _spark_knows(spark: SparkSession, parts: list[str]) -> bool:
    try:
        return bool(spark.catalog.tableExists(".".join(quote_name(p) for p in parts)))
    except Exception:  # a name Spark cannot parse names nothing it knows
        return False


def _delta_only(operation: str, handler: _Handler) -> _Handler:
    """``handler``, with Delta's ``DELTA_TABLE_ONLY_OPERATION`` for a path or a name that exists but
    holds no Delta table (a name that names nothing stays ``TABLE_OR_VIEW_NOT_FOUND``)."""

    def run(spark: SparkSession, m: re.Match[str]) -> DataFrame | None:
        try:
            return handler(spark, m)
        except TableNotFoundError as e:
            path, parts = table_reference(m.group("table"))
            if path is not None and not DeltaLog.for_table(path).exists():
                name = quote_name(path)  # as Delta's DeltaTableIdentifier writes it
            elif path is None and e.error_class == "TABLE_OR_VIEW_NOT_FOUND" and _spark_knows(spark, parts):
                name = ".".join(quote_name(p) for p in parts)
            else:
                raise
            raise TableNotFoundError(
                f"{name} is not a Delta table. {operation} is only supported for Delta tables.",
                error_class="DELTA_TABLE_ONLY_OPERATION",
                sql_state="0AKDD",
            ) from None

    return run


HANDLERS: list[tuple[re.Pattern[str], _Handler]] = [
    (_HISTORY, _delta_only("DESCRIBE HISTORY", _history)),
    (_DETAIL, _detail),
    (_VACUUM, _delta_only("VACUUM", _vacuum)),
    (_RESTORE, _delta_only("RESTORE", _restore)),
    (_OPTIMIZE, _delta_only("OPTIMIZE", _optimize)),
    (_REORG, _delta_only("REORG", _reorg)),
    (_CONVERT, _convert),
    (_GENERATE, _delta_only("GENERATE", _generate)),
    (_CLONE, _clone),
]
