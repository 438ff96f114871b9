"""Planning a MERGE: which executor runs, which target files are candidates, whether the source is
materialized (delta_merge_spec.md §1.5 step 5, §1.6, §1.7). ``explain()`` prints this and stops."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession

from deltamerge.config import SessionConf
from deltamerge.log.actions import AddFile
from deltamerge.merge.analysis import ResolvedMerge
from deltamerge.merge.clauses import ClauseKind
from deltamerge.predicates import conjunction, disjunction, to_sql
from deltamerge.spark.session import case_sensitive, session_time_zone, setting


@dataclass(frozen=True)
class MergePlan:
    """What the command will do."""

    executor: str  # "insertOnly" | "classic"
    deletion_vectors: bool
    candidate_files: tuple[AddFile, ...]
    skipping_predicate: str | None
    read_whole_table: bool
    materialize: bool
    materialize_reason: str
    job2_join: str
    may_match: Callable[[AddFile], bool] | None

    def describe(self, all_files: Sequence[AddFile]) -> str:
        """Human-readable plan for ``explain()``."""
        before_bytes = sum(f.size for f in all_files)
        after_bytes = sum(f.size for f in self.candidate_files)
        lines = [
            "== deltamerge MERGE plan ==",
            f"executor: {self.executor}" + (" (deletion vectors)" if self.deletion_vectors else ""),
            f"job 2 join type: {self.job2_join}",
            f"data skipping predicate: {self.skipping_predicate or 'none (all files are candidates)'}",
            f"target files before skipping: {len(all_files)} ({before_bytes} bytes)",
            f"target files after skipping: {len(self.candidate_files)} ({after_bytes} bytes)",
            f"source materialized: {self.materialize} (reason: {self.materialize_reason})",
        ]
        return "\n".join(lines)


# Materialization reasons (Delta's ``MergeIntoMaterializeSourceReason``).
NOT_MATERIALIZED_AUTO = "notMaterializedAuto"
NON_DELTA = "materializeNonDeterministicSourceNonDelta"
NON_DETERMINISTIC_OPERATORS = "materializeNonDeterministicSourceOperators"
WITH_UDF = "materializeNonDeterministicSourceWithDeterministicUdf"
IGNORE_UNREADABLE = "materializeIgnoreUnreadableFilesConfigsAreSet"

#: Plans larger than this are not inspected node by node: they are materialized.
_MAX_PLAN_NODES = 5000
_UDF_MARKERS = ("UDF", "UDAF", "UDTF", "UserDefined")
# Leaf relations deltamerge's own scans add (partition-value lookup, deletion-vector positions):
# literal data shipped from the driver, identified by their internal column names.
_INTERNAL_PREFIX = "__dm_"
# Connect: function names whose value can differ between two evaluations of the same plan.
_NONDETERMINISTIC_FUNCTIONS = frozenset(
    {
        "rand",
        "randn",
        "random",
        "uniform",
        "randstr",
        "uuid",
        "shuffle",
        "monotonically_increasing_id",
        "spark_partition_id",
        "input_file_name",
        "input_file_block_start",
        "input_file_block_length",
        "rand_str",
        "try_reflect",
        "reflect",
        "java_method",
    }
)


def _delta_table_root(path: str, cache: dict[str, bool]) -> bool:
    """Whether ``path`` (a local file URI or path) is a file inside a Delta table directory.

    Delta data files are immutable (writers never rewrite a file in place), so a scan of an explicit
    list of them reads the same rows every time, like a Delta scan pinned to a snapshot.
    """
    import os
    from urllib.parse import unquote, urlparse

    if path.startswith("file:"):
        path = unquote(urlparse(path).path)
    elif "://" in path:
        return False
    if not os.path.isfile(path):
        return False
    d = os.path.dirname(os.path.abspath(path))
    seen: list[str] = []
    found = False
    while True:
        if d in cache:
            found = cache[d]
            break
        seen.append(d)
        if os.path.isdir(os.path.join(d, "_delta_log")):
            found = True
            break
        parent = os.path.dirname(d)
        if parent == d:
            break
        d = parent
    for x in seen:
        cache[x] = found
    return found


def _node_classes(plan_json: str) -> list[str]:
    """The simple class names of every node of a plan's ``toJSON`` text: plan nodes, their
    expressions, and the plans and expressions of subqueries."""
    out: list[str] = []
    stack: list[object] = [json.loads(plan_json)]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            c = x.get("class")
            if isinstance(c, str):
                out.append(c.rstrip("$").rsplit(".", 1)[-1].rsplit("$", 1)[-1])
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)
    return out


def _is_subquery_expression(name: str) -> bool:
    # ScalarSubquery, InSubquery, LateralSubquery, ...: not the SubqueryAlias plan node of an alias.
    return ("Subquery" in name and name != "SubqueryAlias") or name in ("Exists", "ListQuery")


def _classic_traits(source: DataFrame) -> SourceTraits:
    """Delta's auto-mode rules over the analysed plan of a classic DataFrame.

    The expressions are read from the plan's JSON text in one round trip: a walk over them costs
    ~5 round trips per expression node (2.8 s for a source of 300 computed columns). Only the plan
    nodes are walked, for the leaves; a plan with subqueries (whose leaves sit in expressions) or
    without JSON takes the walk over everything."""
    plan = source._jdf.queryExecution().analyzed()  # type: ignore[attr-defined]
    try:
        classes = _node_classes(str(plan.toJSON()))
    except Exception:
        return _classic_walk_traits(plan)
    if len(classes) > _MAX_PLAN_NODES:
        raise _Uninspected
    has_udf = any(m in name for name in classes for m in _UDF_MARKERS)
    if any(_is_subquery_expression(name) for name in classes):
        return _classic_walk_traits(plan)
    delta_dirs: dict[str, bool] = {}
    non_delta = False
    stack = [plan]
    while stack and not non_delta:
        node = stack.pop()
        children = node.children()
        n_children = children.size()
        stack.extend(children.apply(i) for i in range(n_children))
        if n_children == 0:
            non_delta = not _classic_leaf_is_pinned(node, delta_dirs)
    return SourceTraits(non_delta, not plan.deterministic(), has_udf)


def _classic_walk_traits(plan) -> SourceTraits:  # type: ignore[no-untyped-def]
    """The rules by a walk over every plan and expression node (a few round trips per node)."""
    delta_dirs: dict[str, bool] = {}
    has_udf = False
    non_delta = False
    stack = [plan]
    visited = 0
    while stack:
        node = stack.pop()
        visited += 1
        if visited > _MAX_PLAN_NODES:
            raise _Uninspected
        children = node.children()
        n_children = children.size()
        for i in range(n_children):
            stack.append(children.apply(i))
        exprs = node.expressions()
        expr_stack = [exprs.apply(i) for i in range(exprs.size())]
        while expr_stack and not has_udf:
            e = expr_stack.pop()
            visited += 1
            if visited > _MAX_PLAN_NODES:
                raise _Uninspected
            name = e.getClass().getSimpleName()
            if any(m in name for m in _UDF_MARKERS):
                has_udf = True
                break
            if "Subquery" in name or name in ("Exists", "ListQuery"):
                # An InSubquery holds its ListQuery as a child instead of a plan.
                with contextlib.suppress(Exception):
                    stack.append(e.plan())
            kids = e.children()
            expr_stack.extend(kids.apply(i) for i in range(kids.size()))
        if n_children == 0 and not non_delta:
            non_delta = not _classic_leaf_is_pinned(node, delta_dirs)
    return SourceTraits(non_delta, not plan.deterministic(), has_udf)


@dataclass(frozen=True)
class SourceTraits:
    """What auto mode's rules ask of a source plan."""

    non_delta: bool  # a leaf that is not a Delta scan
    nondeterministic: bool  # an operator or expression Spark marks non-deterministic
    has_udf: bool  # a UDF, even one marked deterministic
    # A relation whose plan this side cannot see (Spark Connect: SQL text, a table or view by
    # name, a cached relation): it may hold anything the two flags above would catch.
    opaque: bool = False

    def reason(self, unreadable: bool) -> str:
        """Delta's first reason in its order (``shouldMaterializeSource``): a leaf that is not a
        Delta scan, non-deterministic operators, ``ignoreCorruptFiles``/``ignoreMissingFiles``
        (``unreadable``), then a UDF."""
        if self.non_delta:
            return NON_DELTA
        if self.nondeterministic:
            return NON_DETERMINISTIC_OPERATORS
        if unreadable:
            return IGNORE_UNREADABLE
        return WITH_UDF if self.has_udf else NOT_MATERIALIZED_AUTO


def _classic_leaf_is_pinned(leaf, delta_dirs: dict[str, bool]) -> bool:  # type: ignore[no-untyped-def]
    kind = leaf.getClass().getSimpleName()
    if kind == "LogicalRelation":
        rel = leaf.relation()
        if rel.getClass().getSimpleName() != "HadoopFsRelation":
            return False
        if rel.fileFormat().getClass().getSimpleName() != "ParquetFileFormat":
            return False
        if rel.location().getClass().getSimpleName() != "InMemoryFileIndex":
            return False
        # One text for every root: a round trip per file was ~4,000 of them for a 2,000-file source.
        text = str(rel.location().rootPaths().mkString("\x00"))
        return all(_delta_table_root(root, delta_dirs) for root in (text.split("\x00") if text else ()))
    if kind in ("LogicalRDD", "LocalRelation"):
        out = leaf.output()
        names = [out.apply(i).name() for i in range(out.size())]
        return bool(names) and all(n.startswith(_INTERNAL_PREFIX) for n in names)
    return False


def _connect_traits(source: DataFrame) -> SourceTraits:
    """The same rules over a Spark Connect plan (the unresolved protobuf relation)."""
    from google.protobuf.message import Message

    rel = source._plan.plan(source._session.client)  # type: ignore[attr-defined,operator]
    delta_dirs: dict[str, bool] = {}
    has_udf = nondeterministic = non_delta = opaque = False
    stack: list[Message] = [rel]
    visited = 0
    while stack:
        msg = stack.pop()
        visited += 1
        if visited > _MAX_PLAN_NODES * 4:
            raise _Uninspected
        kind = msg.DESCRIPTOR.name
        if kind in (
            "CommonInlineUserDefinedFunction",
            "CommonInlineUserDefinedTableFunction",
            "PythonUDF",
            "ScalarScalaUDF",
            "JavaUDF",
        ):
            has_udf = True
        elif kind == "UnresolvedFunction":
            if msg.function_name.lower() in _NONDETERMINISTIC_FUNCTIONS:  # type: ignore[attr-defined]
                nondeterministic = True
            elif msg.is_user_defined_function:  # type: ignore[attr-defined]
                has_udf = True
        elif kind == "ExpressionString":  # F.expr / selectExpr / filter text
            text_nondeterministic, text_opaque = _expression_text_traits(msg.expression)  # type: ignore[attr-defined]
            nondeterministic = nondeterministic or text_nondeterministic
            opaque = opaque or text_opaque
        elif kind == "Read":
            which = msg.WhichOneof("read_type")  # type: ignore[attr-defined]
            if which == "data_source":
                ds = msg.data_source  # type: ignore[attr-defined]
                fmt = (ds.format or "").lower()
                pinned = fmt == "parquet" and bool(ds.paths) and not ds.predicates
                if not pinned or not all(_delta_table_root(p, delta_dirs) for p in ds.paths):
                    non_delta = True
            else:  # a table or view by name: resolved anew by the server on every read
                non_delta = opaque = True
        elif kind == "LocalRelation":
            if _INTERNAL_PREFIX + "file" not in (msg.schema or ""):  # type: ignore[attr-defined]
                non_delta = True
        elif kind in ("SQL", "CachedRemoteRelation", "CatalogRelation"):
            non_delta = opaque = True
        elif kind in (
            "Range",
            "CachedLocalRelation",
            "ChunkedCachedLocalRelation",
            "MlRelation",
        ):
            non_delta = True
        for _fd, value in msg.ListFields():
            if isinstance(value, Message):
                stack.append(value)
            elif isinstance(value, (list, tuple)) or type(value).__name__.startswith("Repeated"):
                stack.extend(v for v in value if isinstance(v, Message))
    return SourceTraits(non_delta, nondeterministic, has_udf, opaque)


def _expression_text_traits(text: str) -> tuple[bool, bool]:
    """(non-deterministic, opaque) of an expression given as text on Connect: a function SQLGlot
    does not know may be a UDF called by name, and a subquery reads relations unseen here."""
    from sqlglot import exp

    from deltamerge.predicates import is_deterministic, parse_expression

    try:
        node = parse_expression(text)
    except Exception:
        return False, True
    unseen = node.find(exp.Anonymous, exp.Select, exp.Subquery) is not None
    return not is_deterministic(node), unseen


# A Python UDF's operator in a physical plan's text (BatchEvalPython, ArrowEvalPython, MapInPandas,
# FlatMapGroupsInPandas, PythonMapInArrow, ...), or an unnamed JVM UDF.
_UDF_IN_PLAN_TEXT = re.compile(r"Python|Pandas|MapInArrow|\bUDF\(")
_NONDETERMINISTIC_IN_PLAN_TEXT = re.compile(r"\b(?:" + "|".join(sorted(_NONDETERMINISTIC_FUNCTIONS)) + r")\(")


def opaque_source_repeatable(source: DataFrame) -> bool:
    """Spark Connect: whether a source holding relations the client cannot see into (SQL text, a
    view by name) calls no UDF and no non-deterministic function, read from the text of its
    physical plan (one round trip). Any doubt (a failed call, a match in a literal) says no."""
    try:
        text = source._explain_string(mode="simple")  # type: ignore[operator]
    except Exception:
        return False
    return not (_UDF_IN_PLAN_TEXT.search(text) or _NONDETERMINISTIC_IN_PLAN_TEXT.search(text))


class _Uninspected(Exception):
    """The plan is too large to inspect node by node."""


def source_materialization_reason(
    spark: SparkSession, source: DataFrame, *, uninspected: str = NON_DELTA
) -> str:
    """Auto mode (delta_merge_spec.md §1.7): why ``source`` must be materialized, or
    ``notMaterializedAuto`` when reading it twice gives the same rows.

    A "Delta scan" here is a Parquet scan of an explicit list of files that live inside Delta table
    directories (what ``deltamerge.read`` produces: one snapshot's immutable data files), plus the
    literal lookup relations deltamerge's scans attach. Everything Delta materializes stays
    materialized: other file scans, local data, ranges, non-deterministic operators, UDFs,
    ``ignoreCorruptFiles``/``ignoreMissingFiles``. A plan that could not be inspected (an error, or
    too many nodes) gives ``uninspected``: by default it is materialized.
    """
    traits = source_traits(spark, source)
    if traits is None:
        return uninspected
    forced = bool(setting(spark, SessionConf.MATERIALIZE_WITH_UNREADABLE_FILES))
    return traits.reason(forced and ignores_unreadable_files(spark))


def source_traits(spark: SparkSession, source: DataFrame) -> SourceTraits | None:
    """The plan's traits auto mode asks about; None when it could not be inspected (an error, or
    too many nodes)."""
    from deltamerge.spark.session import is_connect

    try:
        return _connect_traits(source) if is_connect(spark) else _classic_traits(source)
    except Exception:
        return None


def ignores_unreadable_files(spark: SparkSession) -> bool:
    """``spark.sql.files.ignoreCorruptFiles`` or ``ignoreMissingFiles``: reads may skip files."""
    from deltamerge.spark.session import conf_getter

    get = conf_getter(spark)
    keys = ("spark.sql.files.ignoreCorruptFiles", "spark.sql.files.ignoreMissingFiles")
    return any((get(key) or "false").lower() == "true" for key in keys)


def _materialization(
    spark: SparkSession, insert_only_path: bool, source: DataFrame | None = None
) -> tuple[bool, str]:
    mode = str(setting(spark, SessionConf.MATERIALIZE_SOURCE)).lower()
    if mode == "none":
        return False, "notMaterializedNone"
    if mode == "all":
        return True, "materializeAll"
    if mode != "auto":
        return True, "invalidConfigurationFailsafe"
    if insert_only_path:
        return False, "notMaterializedAutoInsertOnly"
    if source is None:
        return True, NON_DELTA
    reason = source_materialization_reason(spark, source)
    return reason != NOT_MATERIALIZED_AUTO, reason


def plan_merge(spark: SparkSession, rm: ResolvedMerge, snapshot, dv_enabled: bool) -> MergePlan:  # type: ignore[no-untyped-def]
    """Pick the executor and the candidate files."""
    from deltamerge.skipping import file_filter

    insert_only = rm.is_insert_only and setting(spark, SessionConf.OPTIMIZE_INSERT_ONLY)
    has_nmbs = bool(rm.of_kind(ClauseKind.NOT_MATCHED_BY_SOURCE))
    predicate = None
    if not has_nmbs:
        predicate = conjunction(list(rm.target_only_conjuncts))
        if rm.is_matched_only and not insert_only:
            per_clause = list(rm.clause_target_only)
            if per_clause and all(p is not None for p in per_clause):
                extra = disjunction([p for p in per_clause if p is not None])
                predicate = extra if predicate is None else conjunction([predicate, extra])  # type: ignore[list-item]
    files = snapshot.files
    may_match = None
    candidates = tuple(files)
    if predicate is not None:
        may_match = file_filter(
            predicate,
            snapshot.metadata.schema,
            snapshot.metadata.partition_columns,
            case_sensitive=case_sensitive(spark),
            session_tz=session_time_zone(spark),
        )
        if setting(spark, SessionConf.STATS_SKIPPING):
            candidates = tuple(f for f in files if may_match(f))
    if insert_only:
        job2 = "leftAnti"
    elif dv_enabled:
        if rm.is_matched_only:
            job2 = "inner"
        elif not has_nmbs:
            job2 = "leftOuter"
        elif not rm.of_kind(ClauseKind.NOT_MATCHED):
            job2 = "rightOuter"
        else:
            job2 = "fullOuter"
    else:
        job2 = (
            "rightOuter"
            if rm.is_matched_only and setting(spark, SessionConf.OPTIMIZE_MATCHED_ONLY)
            else "fullOuter"
        )
    materialize, reason = _materialization(spark, insert_only, rm.spec.source)
    return MergePlan(
        executor="insertOnly" if insert_only else "classic",
        deletion_vectors=dv_enabled and not insert_only,
        candidate_files=candidates,
        skipping_predicate=None if predicate is None else to_sql(predicate),
        read_whole_table=predicate is None,
        materialize=materialize,
        materialize_reason=reason,
        job2_join=job2,
        may_match=may_match,
    )
