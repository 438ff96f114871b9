"""Turn a PySpark ``Column`` given to the builder into SQL text that deltamerge can analyse.

delta-spark hands Columns to the JVM analyzer; deltamerge analyses MERGE itself (it must check
scopes and report Delta's errors), so a Column is converted back to SQL. Classic Columns are walked
through their ColumnNode tree, Connect Columns through their expression tree. Unsupported node
kinds raise a clear error that suggests passing a SQL string instead.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import decimal
import math
import re
import uuid
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from py4j.protocol import Py4JError, Py4JJavaError
from pyspark.sql import Column

from deltamerge.errors import AnalysisError
from deltamerge.spark.types import quote_name, sql_string

_INFIX = {
    "==": "=",
    "=": "=",
    "<=>": "<=>",
    "!=": "<>",
    "<>": "<>",
    "<": "<",
    "<=": "<=",
    ">": ">",
    ">=": ">=",
    "+": "+",
    "-": "-",
    "*": "*",
    "/": "/",
    "%": "%",
    "and": "AND",
    "or": "OR",
    "&": "&",
    "|": "|",
    "^": "^",
}


class _SqlText(str):
    """A literal already rendered as SQL (temporal values), emitted as is."""


def _literal_sql(value: Any) -> str:
    if isinstance(value, _SqlText):
        return str(value)
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float):  # a DOUBLE, as lit(1.5) is (plain 1.5 would parse as a DECIMAL)
        return f"{value!r}D" if math.isfinite(value) else f"CAST('{value!r}' AS DOUBLE)"
    if isinstance(value, (int, decimal.Decimal)):
        return repr(value) if not isinstance(value, decimal.Decimal) else f"{value}BD"
    if isinstance(value, _dt.datetime):
        if value.tzinfo is not None:  # an instant: exact whatever the session time zone
            return _timestamp_micros(value)
        return f"TIMESTAMP'{value.isoformat(sep=' ')}'"
    if isinstance(value, _dt.date):
        return f"DATE'{value.isoformat()}'"
    if isinstance(value, (bytes, bytearray)):
        return f"X'{bytes(value).hex()}'"
    return sql_string(str(value))


def sql_literal(value: Any) -> str:
    """A Python value (None, bool, number, string, bytes, date, datetime) as a Spark SQL literal."""
    return _literal_sql(value)


def _interval_sql(micros: int) -> _SqlText:
    """A day-time interval of ``micros`` microseconds as SQL."""
    return _SqlText(f"MAKE_DT_INTERVAL(0, 0, 0, {decimal.Decimal(micros) / 1_000_000})")


def _timestamp_micros(value: _dt.datetime) -> str:
    epoch = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
    delta = value - epoch
    micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    return f"TIMESTAMP_MICROS({micros})"


def _extraction_key(value: Any, rendered: str) -> str:
    # A struct field name must stay a string *literal* for Spark's analyzer (a concat() of pieces,
    # as sql_string writes a quote or backslash, is refused there): escaped in the default syntax.
    if isinstance(value, str) and ("'" in value or "\\" in value):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return rendered


def _extract_sql(child: str, extraction_sql: str) -> str:
    # col["f"] / col.getField("f") / col[0] / col.getItem(k): Spark SQL's bracket form serves struct
    # fields, array indexes and map keys alike.
    return f"{child}[{extraction_sql}]"


def _function_sql(name: str, args: list[str], distinct: bool = False) -> str:
    lname = name.lower()
    if lname in _INFIX and len(args) == 2:
        return f"({args[0]} {_INFIX[lname]} {args[1]})"
    if lname in ("-", "negative") and len(args) == 1:
        return f"(- {args[0]})"
    if lname in ("!", "not") and len(args) == 1:
        return f"(NOT {args[0]})"
    if lname == "isnull" and len(args) == 1:
        return f"({args[0]} IS NULL)"
    if lname == "isnotnull" and len(args) == 1:
        return f"({args[0]} IS NOT NULL)"
    if lname == "in" and args:
        return f"({args[0]} IN ({', '.join(args[1:])}))"
    prefix = "DISTINCT " if distinct else ""
    return f"{name}({prefix}{', '.join(args)})"


def _lambda_name(name: str) -> str:
    # PySpark names a Python lambda's parameters x_1, y_2, ...
    return name if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) else quote_name(name)


def _lambda_sql(names: list[str], body: str) -> str:
    # F.transform(c, lambda x: ...) and the other higher-order functions
    params = names[0] if len(names) == 1 else "(" + ", ".join(names) + ")"
    return f"{params} -> {body}"


#: What ``col.withField(name, value)`` / ``col.dropFields(name)`` become: calls that MERGE analysis
#: expands once the struct's type is known (merge/struct_fields.py); SQL has no such function.
WITH_FIELD = "__dm_with_field"
DROP_FIELD = "__dm_drop_field"


def update_fields_sql(struct: str, name: str, value: str | None) -> str:
    """``struct.withField(name, value)`` (``dropFields(name)`` when ``value`` is None) as a marker call."""
    if value is None:
        return f"{DROP_FIELD}({struct}, {_literal_sql(name)})"
    return f"{WITH_FIELD}({struct}, {_literal_sql(name)}, {value})"


def _unsupported(kind: str) -> AnalysisError:
    return AnalysisError(
        f"Cannot use a Column built from {kind} in a MERGE expression; "
        'pass the expression as a SQL string instead (e.g. "s.value + 1").',
        error_class="DELTA_UNSUPPORTED_EXPRESSION",
    )


# --- Classic (py4j ColumnNode) ----------------------------------------------------------------------

# How a pre-resolved attribute (``df["col"]``: Spark resolves it against ``df`` at once) is written
# as SQL: the MERGE builder decides from the attribute's id which input it belongs to.
_REFS: ContextVar[Callable[[int, str], str] | None] = ContextVar("deltamerge_attribute_refs", default=None)


@contextlib.contextmanager
def attribute_refs(render: Callable[[int, str], str] | None) -> Iterator[None]:
    """Render pre-resolved attributes with ``render(expr_id, name)`` inside the block."""
    token = _REFS.set(render)
    try:
        yield
    finally:
        _REFS.reset(token)


def _seq(scala_seq: Any) -> list[Any]:
    return [scala_seq.apply(i) for i in range(scala_seq.size())]


def _classic_sql(node: Any) -> str:
    kind = node.getClass().getSimpleName()
    if kind == "SqlExpression":
        return f"({node.expression()})"
    if kind == "UnresolvedAttribute":
        return ".".join(quote_name(p) for p in _seq(node.nameParts()))
    if kind == "Literal":
        return _literal_sql(_py_value(node.value()))
    if kind == "UnresolvedFunction":
        name = str(node.functionName())
        keep = name.lower() == "struct"
        args = [_classic_arg(a) if keep else _classic_sql(a) for a in _seq(node.arguments())]
        return _function_sql(name, args, bool(node.isDistinct()))
    if kind == "Cast":
        mode = node.evalMode()
        cast = "TRY_CAST" if mode.isDefined() and "Try" in mode.get().getClass().getName() else "CAST"
        return f"{cast}({_classic_sql(node.child())} AS {node.dataType().sql()})"
    if kind == "LambdaFunction":
        names = [_lambda_name(str(a.name())) for a in _seq(node.arguments())]
        return _lambda_sql(names, _classic_sql(node.function()))
    if kind == "UnresolvedNamedLambdaVariable":
        return _lambda_name(str(node.name()))
    if kind == "Alias":
        return _classic_sql(node.child())
    if kind == "UnresolvedExtractValue":
        key = node.extraction()
        value = _py_value(key.value()) if key.getClass().getSimpleName() == "Literal" else None
        return _extract_sql(_classic_sql(node.child()), _extraction_key(value, _classic_sql(key)))
    if kind == "ExpressionColumnNode":
        inner = node.expression()
        if inner.getClass().getSimpleName() == "AttributeReference":
            render = _REFS.get()
            name = str(inner.name())
            return render(int(inner.exprId().id()), name) if render else quote_name(name)
        if inner.getClass().getSimpleName() == "PythonUDF":
            return _classic_udf_sql(inner)
        raise _unsupported(str(inner.getClass().getSimpleName()))
    if kind == "UpdateFields":
        value = node.valueExpression()
        return update_fields_sql(
            _classic_sql(node.structExpression()),
            str(node.fieldName()),
            _classic_sql(value.get()) if value.isDefined() else None,
        )
    if kind == "CaseWhenOtherwise":
        parts = ["CASE"]
        for branch in _seq(node.branches()):
            parts.append(f"WHEN {_classic_sql(branch._1())} THEN {_classic_sql(branch._2())}")
        other = node.otherwise()
        if other.isDefined():
            parts.append(f"ELSE {_classic_sql(other.get())}")
        parts.append("END")
        return "(" + " ".join(parts) + ")"
    raise _unsupported(kind)


def _classic_arg(node: Any) -> str:
    # struct(col.alias("a")) names its field after the alias: SQL's struct(x AS a).
    if node.getClass().getSimpleName() == "Alias":
        names = _seq(node.name())
        if len(names) == 1:
            return f"{_classic_sql(node.child())} AS {quote_name(str(names[0]))}"
    return _classic_sql(node)


# The session a builder's Columns belong to (its source's): a UDF Column is registered there.
_SESSION: ContextVar[Any] = ContextVar("deltamerge_column_session", default=None)
# Where the block's UDF registrations wait to be run (``column_session(..., deferred=...)``).
_DEFERRED: ContextVar[list[PendingUdf] | None] = ContextVar("deltamerge_deferred_udfs", default=None)


@dataclass(frozen=True)
class PendingUdf:
    """A UDF Column's temporary function: ``register()`` before the statement runs, ``drop()`` after."""

    name: str
    session: Any
    register: Callable[[], None]

    def drop(self) -> None:
        """Drop the temporary function (a merge run from a streaming batch must not leave one per batch)."""
        self.session.sql(f"DROP TEMPORARY FUNCTION IF EXISTS {self.name}")


@contextlib.contextmanager
def column_session(session: Any, deferred: list[PendingUdf] | None = None) -> Iterator[None]:
    """Register the UDFs of Columns converted inside the block in ``session``: at once, or, with
    ``deferred``, by the caller around the statement that uses them (appended there)."""
    token = _SESSION.set(session)
    pending = _DEFERRED.set(deferred)
    try:
        yield
    finally:
        _DEFERRED.reset(pending)
        _SESSION.reset(token)


def _registered(name: str, session: Any, register: Callable[[], None]) -> None:
    deferred = _DEFERRED.get()
    if deferred is None:
        register()
    else:
        deferred.append(PendingUdf(name, session, register))


def _session() -> Any:
    from pyspark.sql import SparkSession

    return _SESSION.get() or SparkSession.getActiveSession()


def _udf_name(deterministic: bool) -> str:
    # A Python UDF Column (F.udf(f)(col)) becomes a call of a temporary function registered for it;
    # the name says when it is non-deterministic (refused where MERGE refuses rand()).
    from deltamerge.predicates import NON_DETERMINISTIC_UDF_PREFIX

    return f"{'__dm_udf_' if deterministic else NON_DETERMINISTIC_UDF_PREFIX}{uuid.uuid4().hex[:16]}"


def _classic_udf_sql(udf: Any) -> str:
    session = _session()
    jvm = getattr(session, "_jvm", None)
    if session is None or jvm is None:
        raise _unsupported("PythonUDF (no active session)")
    name = _udf_name(bool(udf.udfDeterministic()))
    make = jvm.org.apache.spark.sql.execution.python.UserDefinedPythonFunction
    params = (name, udf.func(), udf.dataType(), udf.evalType(), udf.udfDeterministic())
    try:  # Spark 4.1+ takes two more lists; 4.0 has only the five arguments
        function = make(*params, jvm.java.util.ArrayList(), jvm.java.util.ArrayList())
    except Py4JError as e:
        if isinstance(e, Py4JJavaError):
            raise
        function = make(*params)
    _registered(name, session, lambda: session._jsparkSession.udf().registerPython(name, function))
    args = []
    for child in _seq(udf.children()):
        wrapped = child.getClass().getSimpleName() == "ColumnNodeExpression"
        args.append(_classic_sql(child.node()) if wrapped else f"({child.sql()})")
    return f"{name}({', '.join(args)})"


def _connect_udf_sql(expr: Any) -> str:
    session = _session()
    function: Any = getattr(expr, "_function", None)
    if session is None or type(function).__name__ != "PythonUDF":
        raise _unsupported(type(expr).__name__)
    deterministic = bool(expr._deterministic)
    name = _udf_name(deterministic)
    _registered(
        name,
        session,
        lambda: session._client.register_udf(  # type: ignore[attr-defined]
            function._func, function._output_type, name, function._eval_type, deterministic
        ),
    )
    return f"{name}({', '.join(_connect_sql(a) for a in expr._arguments)})"


def _py_value(value: Any) -> Any:
    # py4j hands back Python primitives for primitive literals and Java objects for the rest.
    if value is None or isinstance(value, (bool, int, float, str, bytes, bytearray, decimal.Decimal)):
        return value  # py4j converts java.math.BigDecimal (a DECIMAL literal's value) to Decimal
    try:
        cls = value.getClass().getName()
    except Exception:
        return str(value)
    if cls in ("java.sql.Date", "java.time.LocalDate"):
        return _SqlText(f"DATE'{value.toString()}'")
    if cls == "java.sql.Timestamp":  # an instant (PySpark converted the datetime in the local zone)
        micros = (int(value.getTime()) // 1000) * 1_000_000 + int(value.getNanos()) // 1000
        return _SqlText(f"TIMESTAMP_MICROS({micros})")
    if cls == "java.time.Instant":
        micros = int(value.getEpochSecond()) * 1_000_000 + int(value.getNano()) // 1000
        return _SqlText(f"TIMESTAMP_MICROS({micros})")
    if cls == "java.time.LocalDateTime":
        return _SqlText(f"CAST('{value.toString().replace('T', ' ')}' AS TIMESTAMP_NTZ)")
    if cls == "java.math.BigDecimal":
        return decimal.Decimal(str(value.toPlainString()))
    if cls == "java.time.Duration":  # lit(timedelta(...)): a day-time interval
        return _interval_sql(int(value.getSeconds()) * 1_000_000 + int(value.getNano()) // 1000)
    return str(value)


# --- Connect (Python expression tree) ----------------------------------------------------------------


def _connect_sql(expr: Any) -> str:
    kind = type(expr).__name__
    if kind == "SQLExpression":
        return f"({expr._expr})"
    if kind == "ColumnReference":
        from pyspark.sql.connect.expressions import ColumnReference  # noqa: F401 - for clarity of the type

        name = expr._unparsed_identifier
        render = _REFS.get()
        plan_id = getattr(expr, "_plan_id", None)
        if render is not None and plan_id is not None and "`" not in name and "." not in name:
            return render(int(plan_id), name)  # df["col"]: tied to df's plan
        return name if "`" in name else ".".join(quote_name(p) for p in name.split("."))
    if kind == "LiteralExpression":
        return _literal_sql(_connect_literal(expr._value, expr._dataType))
    if kind == "UnresolvedFunction":
        keep = str(expr._name).lower() == "struct"
        args = [_connect_arg(a) if keep else _connect_sql(a) for a in expr._args]
        return _function_sql(expr._name, args, bool(getattr(expr, "_is_distinct", False)))
    if kind == "CastExpression":
        dt = expr._data_type
        type_sql = dt if isinstance(dt, str) else dt.simpleString()
        cast = "TRY_CAST" if getattr(expr, "_eval_mode", None) == "try" else "CAST"
        return f"{cast}({_connect_sql(expr._expr)} AS {type_sql})"
    if kind == "LambdaFunction":
        names = [_lambda_name(".".join(a._name_parts)) for a in expr._arguments]
        return _lambda_sql(names, _connect_sql(expr._function))
    if kind == "UnresolvedNamedLambdaVariable":
        return _lambda_name(".".join(expr._name_parts))
    if kind == "ColumnAlias":
        return _connect_sql(expr._child)
    if kind == "UnresolvedExtractValue":
        key = expr._extraction
        value = getattr(key, "_value", None) if type(key).__name__ == "LiteralExpression" else None
        return _extract_sql(_connect_sql(expr._child), _extraction_key(value, _connect_sql(key)))
    if kind == "CommonInlineUserDefinedFunction":
        return _connect_udf_sql(expr)
    if kind == "WithField":
        return update_fields_sql(
            _connect_sql(expr._structExpr), str(expr._fieldName), _connect_sql(expr._valueExpr)
        )
    if kind == "DropField":
        return update_fields_sql(_connect_sql(expr._structExpr), str(expr._fieldName), None)
    if kind == "CaseWhen":
        parts = ["CASE"]
        for cond, value in expr._branches:
            parts.append(f"WHEN {_connect_sql(cond)} THEN {_connect_sql(value)}")
        if expr._else_value is not None:
            parts.append(f"ELSE {_connect_sql(expr._else_value)}")
        parts.append("END")
        return "(" + " ".join(parts) + ")"
    raise _unsupported(kind)


def _connect_arg(expr: Any) -> str:
    # struct(col.alias("a")) names its field after the alias: SQL's struct(x AS a).
    names = getattr(expr, "_alias", None) if type(expr).__name__ == "ColumnAlias" else None
    if names is not None and len(names) == 1:
        return f"{_connect_sql(expr._child)} AS {quote_name(str(names[0]))}"
    return _connect_sql(expr)


def _connect_literal(value: Any, data_type: Any) -> Any:
    """A Connect literal's Python value: Connect keeps dates, timestamps and intervals in their
    internal form (days, microseconds), which must not be rendered as numbers."""
    from pyspark.sql.types import DateType, DayTimeIntervalType, TimestampNTZType, TimestampType

    if value is None:
        return None
    if isinstance(data_type, DateType) and isinstance(value, int):
        return _SqlText(f"DATE'{DateType().fromInternal(value).isoformat()}'")
    if isinstance(data_type, TimestampType) and isinstance(value, int):
        return _SqlText(f"TIMESTAMP_MICROS({value})")
    if isinstance(data_type, TimestampNTZType) and isinstance(value, int):
        wall = TimestampNTZType().fromInternal(value)
        return _SqlText(f"CAST('{wall.isoformat(sep=' ')}' AS TIMESTAMP_NTZ)")
    if isinstance(data_type, DayTimeIntervalType) and isinstance(value, int):
        return _interval_sql(value)
    return value


def column_to_sql(col: Column) -> str:
    """SQL text equivalent to ``col`` (for analysis by deltamerge)."""
    if type(col).__module__.startswith("pyspark.sql.connect"):
        return _connect_sql(col._expr)  # type: ignore[attr-defined]
    return _classic_sql(col._jc.node())  # type: ignore[attr-defined, operator]


def expression_text(value: str | Column) -> str:
    """SQL text of a builder argument given as a SQL string or a Column."""
    if isinstance(value, str):
        return value
    return column_to_sql(value)
