"""Write-time constraints: NOT NULL columns, CHECK constraints and column invariants.

Every row a write puts into a data file (``deltamerge.write`` appends and overwrites, MERGE's
rewritten, updated and inserted rows) is checked against

- **NOT NULL**: fields of the table schema with ``nullable: false``, nested struct fields included
  (a nested field is only required while its parents are non-null), array elements with
  ``containsNull: false`` and map values with ``valueContainsNull: false``, as delta-spark's
  ``Invariants.getFromSchema``;
- **CHECK constraints**: table properties ``delta.constraints.<name> = <SQL expression>``;
- **generated columns**: ``<column> <=> (<generation expression>)``, named ``Generated Column``
  as in Delta (a value a writer provided must be the one the expression computes);
- **column invariants**: the legacy ``delta.invariants`` field metadata,
  ``{"expression": {"expression": "<SQL expression>"}}``, named ``EXPRESSION(<expr>)``.

As in delta-spark (``CheckDeltaInvariant``), a CHECK or invariant expression that evaluates to NULL
is a violation, not a pass.

The check is Spark-native: one ``CASE WHEN <violated> THEN raise_error(...)`` wrapped around the first
written column, evaluated in the same job that writes the files (a projection, so the optimizer can
neither prune it nor push it below a join onto rows that are not written). Spark reports the
violation as a failed job; :func:`enforced_write` turns that into
:class:`~deltamerge.errors.InvariantViolationError` with Delta's error class and message. The write
aborts before its staged files are moved into the table, so nothing is committed and no file stays.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from pyspark.errors import AnalysisException as SparkAnalysisException
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DataType, MapType, StructType

from deltamerge.errors import AnalysisError, DeltaMergeError, InvariantViolationError
from deltamerge.generated import check_expression, generated_columns
from deltamerge.log import char_varchar
from deltamerge.spark.types import as_nullable, quote_name

CONSTRAINT_PREFIX = "delta.constraints."
INVARIANTS_FIELD = "delta.invariants"

_MARK = "<<DM_CONSTRAINT:"
_END = "<<DM_CONSTRAINT_END>>"
_PAYLOAD = re.compile(re.escape(_MARK) + r"(\d+)>>(.*?)" + re.escape(_END), re.DOTALL)

T = TypeVar("T")


@dataclass(frozen=True)
class Constraint:
    """One rule every written row must satisfy."""

    kind: str  # "not_null", "check" or "length" (CHAR/VARCHAR)
    name: str  # column path for NOT NULL and length; constraint name (or EXPRESSION(...)) for CHECK
    expression: str  # SQL that is TRUE for a valid row
    columns: tuple[str, ...] = ()  # columns whose values a CHECK violation reports
    limit: int = 0  # the declared length of a CHAR/VARCHAR column

    def message(self, values: Mapping[str, Any]) -> str:
        """Delta's message for a violation with the reported column values."""
        if self.kind == "not_null":
            return f"NOT NULL constraint violated for column: {self.name}."
        if self.kind == "length":
            return f"Exceeds char/varchar type length limitation: {self.limit}."
        lines = "".join(f"\n - {c} : {_show(values.get(c))}" for c in self.columns)
        return f"CHECK constraint {self.name} ({self.expression}) violated by row with values:{lines}"

    def error(self, values: Mapping[str, Any]) -> InvariantViolationError:
        """The error raised for a violation."""
        hint = " Fix the data before writing it (rows that violate a table constraint are never written)"
        if self.kind == "check" and self.name == "Generated Column":
            hint += ": give the generated column the value its expression computes, or leave it out."
        elif self.kind == "check" and not self.name.startswith("EXPRESSION("):
            hint += f", or remove the constraint with ALTER TABLE ... DROP CONSTRAINT {self.name}."
        else:
            hint += "."
        if self.kind == "not_null":
            return InvariantViolationError(
                self.message(values) + hint,
                error_class="DELTA_NOT_NULL_CONSTRAINT_VIOLATED",
                sql_state="23502",
            )
        if self.kind == "length":
            return InvariantViolationError(
                f"{self.message(values)} Column {self.name} holds a longer value: shorten it, or "
                "widen the column's declared type.",
                error_class="EXCEED_LIMIT_LENGTH",
                sql_state="54006",
            )
        return InvariantViolationError(self.message(values) + "\n" + hint.strip())


def _show(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value, ensure_ascii=False) if isinstance(value, (dict, list)) else str(value)


def _not_null_rules(
    dtype: DataType, path: list[str], extraction: str, depth: int
) -> list[tuple[list[str], str]]:
    """(field path, SQL true for valid rows), as delta-spark's ``traverseNullCheckExpressions``."""
    rules: list[tuple[list[str], str]] = []
    if isinstance(dtype, StructType):
        for f in dtype.fields:
            child_path = [*path, f.name]
            child = f"{extraction}.{quote_name(f.name)}" if extraction else quote_name(f.name)
            nested = _not_null_rules(f.dataType, child_path, child, depth)
            if not f.nullable:
                rules.append((child_path, f"{child} IS NOT NULL"))
            else:
                nested = [(p, f"({child} IS NULL OR {e})") for p, e in nested]
            rules += nested
    elif isinstance(dtype, ArrayType):
        var = f"__dm_e{depth}"
        nested = _not_null_rules(dtype.elementType, [*path, "element"], var, depth + 1)
        if not dtype.containsNull:
            rules.append(([*path, "element"], f"forall({extraction}, {var} -> {var} IS NOT NULL)"))
        else:
            nested = [(p, f"({var} IS NULL OR {e})") for p, e in nested]
        rules += [(p, f"forall({extraction}, {var} -> {e})") for p, e in nested]
    elif isinstance(dtype, MapType):
        kvar, vvar = f"__dm_k{depth}", f"__dm_v{depth}"
        keys = _not_null_rules(dtype.keyType, [*path, "key"], kvar, depth + 1)
        values = _not_null_rules(dtype.valueType, [*path, "value"], vvar, depth + 1)
        if not dtype.valueContainsNull:
            rules.append(
                ([*path, "value"], f"forall(map_values({extraction}), {vvar} -> {vvar} IS NOT NULL)")
            )
        else:
            values = [(p, f"({vvar} IS NULL OR {e})") for p, e in values]
        rules += [(p, f"forall(map_keys({extraction}), {kvar} -> {e})") for p, e in keys]
        rules += [(p, f"forall(map_values({extraction}), {vvar} -> {e})") for p, e in values]
    return rules


def _reference_paths(expression: str) -> list[tuple[str, ...]]:
    """The column paths ``expression`` refers to (none when it does not parse)."""
    from deltamerge.predicates import column_parts, column_references, parse_expression

    try:
        refs = column_references(parse_expression(expression))
    except Exception:  # the expression is reported as written; values are a convenience
        return []
    out = []
    for ref in refs:
        try:
            out.append(tuple(column_parts(ref)))
        except ValueError:
            continue
    return out


def _referenced_columns(expression: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(".".join(p) for p in _reference_paths(expression)))


def _invariants(schema: StructType, prefix: list[str]) -> list[Constraint]:
    out: list[Constraint] = []
    for f in schema.fields:
        raw = (f.metadata or {}).get(INVARIANTS_FIELD)
        if raw is not None:
            try:
                rule = json.loads(raw) if isinstance(raw, str) else raw
                expression = rule["expression"]["expression"]
                if not isinstance(expression, str):
                    raise TypeError(expression)
            except (ValueError, KeyError, TypeError):
                raise AnalysisError(
                    f"Unrecognized invariant {raw!r} on column {'.'.join([*prefix, f.name])}: expected "
                    '{"expression": {"expression": "<SQL>"}} in the field metadata \'delta.invariants\'. '
                    "Fix or remove the field metadata.",
                    error_class="DELTA_UNRECOGNIZED_INVARIANT",
                ) from None
            out.append(
                Constraint("check", f"EXPRESSION({expression})", expression, _referenced_columns(expression))
            )
        if isinstance(f.dataType, StructType):  # delta-spark does not look into arrays and maps here
            out += _invariants(f.dataType, [*prefix, f.name])
    return out


def constraints_of(schema: StructType, configuration: Mapping[str, str]) -> list[Constraint]:
    """Every constraint of a table: NOT NULL fields, CHECK constraints, generated columns, invariants."""
    rules = [
        Constraint("not_null", ".".join(path), expression)
        for path, expression in _not_null_rules(schema, [], "", 0)
    ]
    for key in sorted(configuration):
        if key.lower().startswith(CONSTRAINT_PREFIX):
            name = key[len(CONSTRAINT_PREFIX) :]
            expression = str(configuration[key])
            rules.append(Constraint("check", name, expression, _referenced_columns(expression)))
    for _, f, text in generated_columns(schema):
        expression = check_expression(f, text)
        rules.append(Constraint("check", "Generated Column", expression, _referenced_columns(expression)))
    return rules + _invariants(schema, []) + _length_rules(schema)


def _length_rules(schema: StructType) -> list[Constraint]:
    """Spark's write-side CHAR/VARCHAR check: a value longer than ``n`` fails unless only trailing
    spaces make it so. Each struct on the way may be null. Elements, keys and values of arrays and
    maps are checked too (Delta's ``CharVarcharConstraint``), one rule per declared length."""
    out = []
    for path, _kind, n in char_varchar.length_limits(schema.jsonValue()):
        parts = [".".join(quote_name(p) for p in path[: i + 1]) for i in range(len(path))]
        nulls = " OR ".join(f"{p} IS NULL" for p in parts)
        expression = f"({nulls} OR length(rtrim({parts[-1]})) <= {n})"
        out.append(Constraint("length", ".".join(path), expression, limit=n))
    for path, declared in char_varchar.nested_limits(schema.jsonValue()):
        parts = [".".join(quote_name(p) for p in path[: i + 1]) for i in range(len(path))]
        nulls = " OR ".join(f"{p} IS NULL" for p in parts[:-1])
        for check, n in _nested_checks(parts[-1], declared, 0):
            expression = f"({nulls} OR {check})" if nulls else check
            out.append(Constraint("length", ".".join(path), expression, limit=n))
    return out


def _nested_checks(sql: str, declared: tuple[Any, ...], depth: int) -> Iterator[tuple[str, int]]:
    """(SQL that is TRUE when every CHAR/VARCHAR value inside ``sql`` fits, its length) per declared
    length inside an array, map or struct; lambda variables are named by depth."""
    kind = declared[0]
    if kind in ("char", "varchar"):
        yield f"({sql} IS NULL OR length(rtrim({sql})) <= {declared[1]})", declared[1]
    elif kind == "array":
        var = f"__e{depth}"
        for inner, n in _nested_checks(var, declared[1], depth + 1):
            yield f"({sql} IS NULL OR forall({sql}, {var} -> {inner}))", n
    elif kind == "map":
        var = f"__e{depth}"
        for side, t in (("map_keys", declared[1]), ("map_values", declared[2])):
            for inner, n in _nested_checks(var, t, depth + 1):
                yield f"({sql} IS NULL OR forall({side}({sql}), {var} -> {inner}))", n
    elif kind == "struct":
        for name, t in declared[1]:
            for inner, n in _nested_checks(f"{sql}.{quote_name(name)}", t, depth):
                yield f"({sql} IS NULL OR {inner})", n


def _payload(index: int, rule: Constraint) -> Column:
    if rule.columns:
        values = F.to_json(
            F.struct(*[F.expr(".".join(quote_name(p) for p in c.split("."))).alias(c) for c in rule.columns]),
            {"ignoreNullFields": "false"},
        )
    else:
        values = F.lit("{}")
    return F.concat(F.lit(f"{_MARK}{index}>>"), values, F.lit(_END))


def _checked(df: DataFrame, rules: list[Constraint], rows: Column | None = None) -> DataFrame:
    first = df.columns[0]
    guarded: Column | None = None
    for i, rule in enumerate(rules):
        violated = ~F.coalesce(F.expr(f"({rule.expression})"), F.lit(False))
        if rows is not None:
            violated = rows & violated
        error = F.raise_error(_payload(i, rule))
        guarded = F.when(violated, error) if guarded is None else guarded.when(violated, error)
    assert guarded is not None
    cols = [guarded.otherwise(F.col(quote_name(first))).alias(first)] + [
        F.col(quote_name(c)) for c in df.columns[1:]
    ]
    return df.select(*cols)


def enforce(
    df: DataFrame, schema: StructType, configuration: Mapping[str, str], rows: Column | None = None
) -> DataFrame:
    """``df`` with the table's constraints checked on every row when it is written (on the
    ``rows`` where that is true, when given: the data rows of a write that carries change rows).

    ``df`` has the table's column names (``schema``, the table schema as written). Without
    constraints ``df`` is returned unchanged. A constraint that cannot be evaluated (unknown
    column, bad SQL) is an :class:`AnalysisError` naming it.
    """
    rules = constraints_of(schema, configuration)
    if not rules or not df.columns:
        return df
    try:
        return _checked(df, rules, rows)
    except Exception as e:
        from pyspark.errors import PySparkException

        if not isinstance(e, PySparkException) or isinstance(e, DeltaMergeError):
            raise
        # Find the culprit to name it.
        for rule in rules:
            try:
                _checked(df, [rule])
            except PySparkException as inner:
                what = (
                    f"NOT NULL on {rule.name}" if rule.kind == "not_null" else f"CHECK constraint {rule.name}"
                )
                raise AnalysisError(
                    f"The table constraint {what} ({rule.expression}) cannot be evaluated against the "
                    f"written columns: {str(inner).splitlines()[0]} Drop the constraint (ALTER TABLE ... "
                    f"DROP CONSTRAINT <name>, or the field metadata '{INVARIANTS_FIELD}') and add it "
                    "again fixed.",
                    error_class="DELTA_INVALID_CHECK_CONSTRAINT_REFERENCES",
                ) from None
        raise


def violation_from(
    error: BaseException, schema: StructType, configuration: Mapping[str, str]
) -> InvariantViolationError | None:
    """The constraint violation a failed Spark write reports, or None for any other failure."""
    if isinstance(error, SparkAnalysisException):
        # A plan that failed analysis prints the check's message template: no row violated it.
        return None
    match = _PAYLOAD.search(str(error))
    if match is None:
        return None
    rules = constraints_of(schema, configuration)
    index = int(match.group(1))
    if index >= len(rules):
        return None
    try:
        values = json.loads(match.group(2))
    except ValueError:
        values = {}
    return rules[index].error(values if isinstance(values, dict) else {})


def _pad(value: Column, spec: Any) -> Column:
    """``value`` padded as ``spec`` says: a width, a subtree of struct fields, or a declared type
    (an array or map holding CHAR values)."""
    if isinstance(spec, int):
        return F.rpad(value, spec, " ")
    if isinstance(spec, dict):
        return _padded(value, spec)
    return _pad_declared(value, spec)


def _pad_declared(value: Column, declared: tuple[Any, ...]) -> Column:
    kind = declared[0]
    if kind == "char":
        return F.rpad(value, declared[1], " ")
    if not char_varchar.has_char_varchar(declared, ("char",)):
        return value
    if kind == "array":
        return F.transform(value, lambda e: _pad_declared(e, declared[1]))
    if kind == "map":
        keys = F.transform(F.map_keys(value), lambda k: _pad_declared(k, declared[1]))
        values = F.transform(F.map_values(value), lambda v: _pad_declared(v, declared[2]))
        return F.map_from_arrays(keys, values)
    if kind == "struct":
        for name, t in declared[1]:
            if char_varchar.has_char_varchar(t, ("char",)):
                value = value.withField(quote_name(name), _pad_declared(value.getField(name), t))
    return value


def _padded(value: Column, tree: dict[str, Any]) -> Column:
    """``value`` with the CHAR leaves of ``tree`` (name -> width, a subtree for a struct field, or
    a declared array / map type) padded; a null struct stays null (``withField`` keeps it)."""
    for name, spec in tree.items():
        value = value.withField(quote_name(name), _pad(value.getField(name), spec))
    return value


def pad_chars(df: DataFrame, schema: StructType) -> DataFrame:
    """``df`` with its CHAR(n) values padded with spaces to ``n``, at the top level and inside
    structs, arrays and maps, as Spark writes them into Delta tables (a value longer only by
    trailing spaces is cut to ``n``; a truly longer one was refused by the length check)."""
    tree: dict[str, Any] = {}
    leaves: list[tuple[tuple[str, ...], Any]] = [
        (path, n) for path, kind, n in char_varchar.length_limits(schema.jsonValue()) if kind == "char"
    ]
    leaves += [
        (path, declared)
        for path, declared in char_varchar.nested_limits(schema.jsonValue())
        if char_varchar.has_char_varchar(declared, ("char",))
    ]
    for path, spec in leaves:
        node = tree
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = spec
    if not tree or not any(c in tree for c in df.columns):  # no CHAR: no schema asked (Connect)
        return df

    def column(c: str) -> Column:
        spec = tree.get(c)
        if spec is None:
            return F.col(quote_name(c))
        return _pad(F.col(quote_name(c)), spec).alias(c)

    return df.select(*[column(c) for c in df.columns])


def enforced_write(
    write: Callable[..., T],
    df: DataFrame,
    schema: StructType,
    configuration: Mapping[str, str],
    *args: Any,
    checked_rows: Column | None = None,
    **kwargs: Any,
) -> T:
    """``write(enforce(df, ...), *args, **kwargs)``, a violation raised as :class:`InvariantViolationError`.

    This is the hook of the write choke points (``deltamerge.write`` and ``MergeContext.write``):
    the writer's own cleanup runs first (staged files are removed), then the Spark job failure is
    replaced by Delta's error. ``checked_rows``: see :func:`enforce`.
    """
    checked = pad_chars(enforce(df, schema, configuration, checked_rows), schema)
    if checked is df:
        return write(df, *args, **kwargs)
    try:
        return write(checked, *args, **kwargs)
    except Exception as e:
        violation = violation_from(e, schema, configuration)
        if violation is None:
            raise
        raise violation from None


def _changed_paths(
    old: StructType, new: StructType, prefix: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], DataType, DataType]]:
    """(path, old type, new type) of each existing field whose type the new schema changes."""
    out = []
    by_name = {f.name.lower(): f for f in new.fields}
    for f in old.fields:
        g = by_name.get(f.name.lower())
        if g is None:
            continue
        path = (*prefix, f.name)
        if isinstance(f.dataType, StructType) and isinstance(g.dataType, StructType):
            out += _changed_paths(f.dataType, g.dataType, path)
        elif as_nullable(f.dataType) != as_nullable(g.dataType):
            out.append((path, f.dataType, g.dataType))
    return out


def _dependents(
    old: StructType, configuration: Mapping[str, str]
) -> list[tuple[str, str, list[tuple[str, list[tuple[str, ...]]]]]]:
    """(kind, error suffix, [(label, referenced paths)]) of the table's CHECK constraints and
    generated columns, the rules whose stored expressions name columns."""

    def rule(label: str, text: str) -> tuple[str, list[tuple[str, ...]]]:
        return label, [tuple(p.lower() for p in r) for r in _reference_paths(text)]

    checks = [
        rule(f"{key} -> {configuration[key]}", str(configuration[key]))
        for key in sorted(configuration)
        if key.lower().startswith(CONSTRAINT_PREFIX)
    ]
    generated = [rule(f"{f.name} -> {text}", text) for _, f, text in generated_columns(old)]
    return [
        ("check constraint(s)", "CONSTRAINT", checks),
        ("generated column(s)", "GENERATED_COLUMNS", generated),
    ]


def _dependent_on(path: tuple[str, ...], rules: list[tuple[str, list[tuple[str, ...]]]]) -> list[str]:
    # The column itself, a field inside it, or a struct that holds it.
    low = tuple(p.lower() for p in path)
    return [label for label, refs in rules if any(r[: len(low)] == low or low[: len(r)] == r for r in refs)]


def check_dependent_types(old: StructType, new: StructType, configuration: Mapping[str, str]) -> None:
    """Delta's ``checkDependentExpressions``: schema evolution must not change the type of a column
    that a CHECK constraint or a generated column refers to (the stored expression was resolved
    against the old type)."""
    changed = _changed_paths(old, new)
    if not changed:
        return
    kinds = _dependents(old, configuration)
    for path, was, now in changed:
        shown = ".".join(path)
        for kind, suffix, rules in kinds:
            dependent = _dependent_on(path, rules)
            if dependent:
                raise AnalysisError(
                    f"Column {shown} has data type {was.simpleString().upper()} and cannot be altered to "
                    f"data type {now.simpleString().upper()} because this column is referenced by the "
                    f"following {kind}:\n" + "\n".join(dependent) + "\nCast the source column to "
                    f"{was.simpleString()} so that the column keeps its type.",
                    error_class=f"DELTA_{suffix}_DATA_TYPE_MISMATCH",
                    sql_state="42K09",
                )


def check_no_dependents(path: tuple[str, ...], schema: StructType, configuration: Mapping[str, str]) -> None:
    """Delta's ``checkDependentExpressions`` for RENAME and DROP COLUMN: a column that a CHECK
    constraint or a generated column names cannot be renamed or dropped."""
    for kind, suffix, rules in _dependents(schema, configuration):
        dependent = _dependent_on(path, rules)
        if dependent:
            raise AnalysisError(
                f"Cannot alter column {'.'.join(path)} because this column is referenced by the following "
                f"{kind}:\n" + "\n".join(dependent) + "\nDrop the constraint or the generated column first.",
                error_class=f"DELTA_{suffix}_DEPENDENT_COLUMN_CHANGE",
                sql_state="42K09",
            )
