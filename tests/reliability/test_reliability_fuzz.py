"""Generated-input fuzzing of the SQL front end and of the merge builder.

Whatever the input, the only acceptable failures are a deltamerge error (``DeltaMergeError``), a
Spark analysis/parse error (``PySparkException``) or, from the builder's own argument checks, its
documented ``TypeError``/``ValueError``. Anything else (KeyError, AttributeError, IndexError,
AssertionError, a sqlglot exception, a TypeError from deep inside...) is a bug.

Statements come from a MERGE grammar (valid and invalid clause mixes, unknown names, aggregates,
subqueries, non-deterministic calls, nested fields) and from random mutations of valid statements
(tokens deleted, duplicated, swapped or inserted, random characters). Most are analysed and
planned through ``EXPLAIN`` (no Spark job); a fraction is executed on a small table.
"""

from __future__ import annotations

import os
import traceback

import pytest
import reliability_helpers as h
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.errors import PySparkException
from pyspark.sql import functions as F

import deltamerge
from deltamerge import DeltaTable
from deltamerge.errors import DeltaMergeError

pytestmark = pytest.mark.spark

SOAK_EXAMPLES = h.soak_int("DELTAMERGE_SOAK_EXAMPLES", 2000)
TARGET_DDL = "id long, v string, p string, s struct<a: long, b: string>"
SOURCE_DDL = TARGET_DDL + ", x int"


def _fuzz(body, ci_examples: int, **strategies):  # type: ignore[no-untyped-def]
    """A CI test (fixed examples, the same every run) and a soak test (many fresh examples) of ``body``."""

    def make(examples: int, derandomize: bool):  # type: ignore[no-untyped-def]
        return settings(
            max_examples=examples,
            deadline=None,
            database=None,
            derandomize=derandomize,
            suppress_health_check=[
                HealthCheck.too_slow,
                HealthCheck.function_scoped_fixture,
                HealthCheck.data_too_large,
            ],
        )(given(**strategies)(body))

    return make(ci_examples, True), pytest.mark.soak(make(SOAK_EXAMPLES, False))


@pytest.fixture(scope="module", autouse=True)
def _quiet_spark(spark):  # type: ignore[no-untyped-def]
    """Expected failures make Spark log every failed task with its stack; keep the output readable."""
    spark.sparkContext.setLogLevel("OFF")
    yield
    spark.sparkContext.setLogLevel("ERROR")


@pytest.fixture(scope="module")
def fuzz_table(spark, tmp_path_factory) -> str:  # type: ignore[no-untyped-def]
    root = str(tmp_path_factory.mktemp("fuzz") / "t")
    rows = [(i, f"v{i}", "ab"[i % 2], (i, f"b{i}")) for i in range(6)]
    deltamerge.write(spark.createDataFrame(rows, TARGET_DDL).coalesce(1), root, partition_by="p")
    deltamerge.register_table(spark, "fuzz_t", root)
    src = [(i, f"n{i}", "abc"[i % 3], (i * 10, None), i) for i in range(3, 8)]
    spark.createDataFrame(src, SOURCE_DDL).createOrReplaceTempView("fuzz_s")
    yield root
    deltamerge.unregister_table(spark, "fuzz_t")


def _acceptable(e: BaseException, builder_checks: bool = False) -> bool:
    if isinstance(e, (DeltaMergeError, PySparkException)):
        return True
    if builder_checks and isinstance(e, (TypeError, ValueError)):
        # Only the builder's documented argument checks, not a TypeError from deeper down.
        last = traceback.extract_tb(e.__traceback__)[-1]
        where = last.filename.replace(os.sep, "/")
        if where.endswith("deltamerge/spark/arg_checks.py"):  # delta-spark's checks, shared with DML
            return last.name in ("check_condition_arg", "check_set_arg")
        return where.endswith("deltamerge/merge/builder.py") and last.name in (
            "_check_condition",
            "_check_dict",
            "validate_merge_args",
        )
    return False


def _run(fn, builder_checks: bool = False) -> None:  # type: ignore[no-untyped-def]
    try:
        fn()
    except Exception as e:
        if not _acceptable(e, builder_checks):
            raise AssertionError(f"internal error {type(e).__name__}: {e}") from e


# --- the MERGE grammar ---------------------------------------------------------------------------------

COLUMNS = [
    "t.id",
    "s.id",
    "t.v",
    "s.v",
    "t.p",
    "s.p",
    "s.x",
    "t.s.a",
    "s.s.b",
    "id",
    "v",
    "x",
    "t.nope",
    "s.nope",
    "t.s.nope",
    "`t`.`id`",
    "s.`v`",
    "u.id",
    "t.*",
]
LITERALS = [
    "1",
    "0",
    "-1",
    "'a'",
    "''",
    "NULL",
    "TRUE",
    "FALSE",
    "1.5",
    "DATE'2024-01-01'",
    "X'00'",
    "2147483648000",
]
FUNCTIONS = [
    "rand()",
    "sum(s.id)",
    "count(*)",
    "(SELECT 1)",
    "current_date()",
    "uuid()",
    "abs(s.id)",
    "CAST(s.v AS INT)",
    "coalesce(t.v, s.v)",
    "row_number() OVER (ORDER BY s.id)",
    "nope(s.id)",
    "named_struct('a', s.id, 'b', s.v)",
    "array(1, 2)",
]

atoms = st.sampled_from(COLUMNS + LITERALS + FUNCTIONS)


def _binary(children):  # type: ignore[no-untyped-def]
    ops = st.sampled_from(["=", "<>", ">", "<=", "AND", "OR", "+", "||", "<=>", "LIKE"])
    return st.one_of(
        st.tuples(children, ops, children).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        children.map(lambda c: f"NOT {c}"),
        children.map(lambda c: f"{c} IS NULL"),
        st.tuples(children, children).map(lambda t: f"{t[0]} IN ({t[1]}, 2)"),
        st.tuples(children, children, children).map(
            lambda t: f"CASE WHEN {t[0]} THEN {t[1]} ELSE {t[2]} END"
        ),
    )


exprs = st.recursive(atoms, _binary, max_leaves=6)
targets_cols = st.sampled_from(
    ["id", "v", "p", "s", "s.a", "s.b", "t.id", "t.v", "t.s.a", "nope", "x", "`v`", "t.nope"]
)


def _assignments(min_size: int = 1):  # type: ignore[no-untyped-def]
    return st.lists(st.tuples(targets_cols, exprs), min_size=min_size, max_size=3).map(
        lambda items: ", ".join(f"{c} = {e}" for c, e in items)
    )


def _cond() -> st.SearchStrategy[str]:
    return st.one_of(st.just(""), exprs.map(lambda e: f" AND {e}"))


matched = st.tuples(
    _cond(),
    st.one_of(
        st.just("UPDATE SET *"),
        _assignments().map(lambda a: f"UPDATE SET {a}"),
        st.just("DELETE"),
        st.just("INSERT *"),
    ),
).map(lambda t: f"WHEN MATCHED{t[0]} THEN {t[1]}")
not_matched = st.tuples(
    st.sampled_from(["", " BY TARGET"]),
    _cond(),
    st.one_of(
        st.just("INSERT *"),
        st.lists(st.tuples(targets_cols, exprs), min_size=1, max_size=3).map(
            lambda items: (
                f"INSERT ({', '.join(c for c, _ in items)}) VALUES ({', '.join(e for _, e in items)})"
            )
        ),
        st.just("INSERT (id) VALUES (s.id, s.v)"),
        st.just("DELETE"),
        st.just("UPDATE SET *"),
    ),
).map(lambda t: f"WHEN NOT MATCHED{t[0]}{t[1]} THEN {t[2]}")
by_source = st.tuples(
    _cond(),
    st.one_of(
        _assignments().map(lambda a: f"UPDATE SET {a}"),
        st.just("DELETE"),
        st.just("UPDATE SET *"),
        st.just("INSERT *"),
    ),
).map(lambda t: f"WHEN NOT MATCHED BY SOURCE{t[0]} THEN {t[1]}")
clauses = st.lists(st.one_of(matched, not_matched, by_source), min_size=0, max_size=4).map(" ".join)
sources = st.sampled_from(
    [
        "fuzz_s",
        "(SELECT * FROM fuzz_s)",
        "(SELECT id, v FROM fuzz_s)",
        "(SELECT *, id AS id2 FROM fuzz_s WHERE x > 4)",
        "(SELECT * FROM fuzz_s UNION ALL SELECT * FROM fuzz_s)",
        "fuzz_t",
        "nowhere",
        "(SELECT 1 AS id)",
        "(SELECT id, id AS id FROM fuzz_s)",
        "(SELECT * FROM VALUES (1, 'z') AS v(id, v))",
    ]
)
statements = st.builds(
    lambda evo, target, src, on, cl: f"MERGE {evo}INTO {target} USING {src} s ON {on} {cl}",
    st.sampled_from(["", "WITH SCHEMA EVOLUTION "]),
    st.sampled_from(
        ["fuzz_t t", "fuzz_t AS t", "fuzz_t", "nowhere t", "delta.`{root}` t", "delta.`/no/such/path` t"]
    ),
    sources,
    exprs,
    clauses,
)

# Valid statements (existing names, Spark's clause order, only the last clause of a kind without a
# condition) reach analysis, planning and execution rather than stopping at the first error.
good_atoms = st.sampled_from(
    ["t.id", "s.id", "t.v", "s.v", "s.x", "t.s.a", "s.s.a", "1", "'z'", "NULL", "s.p"]
)
good_exprs = st.recursive(
    good_atoms,
    lambda c: st.tuples(c, st.sampled_from(["=", "<>", ">", "+", "AND", "OR"]), c).map(
        lambda t: f"({t[0]} {t[1]} {t[2]})"
    ),
    max_leaves=4,
)
good_values = st.sampled_from(["s.v", "t.v", "'q'", "NULL", "concat(s.v, 'x')", "CAST(s.x AS STRING)"])


@st.composite
def valid_statements(draw) -> str:  # type: ignore[no-untyped-def]
    parts = []
    for kind in ("MATCHED", "NOT MATCHED", "NOT MATCHED BY SOURCE"):
        n = draw(st.integers(0, 2))
        for i in range(n):
            cond = "" if i == n - 1 and draw(st.booleans()) else f" AND {draw(good_exprs)}"
            if kind == "MATCHED":
                action = draw(
                    st.sampled_from(
                        [
                            "UPDATE SET *",
                            "DELETE",
                            f"UPDATE SET v = {draw(good_values)}",
                            f"UPDATE SET t.s.a = {draw(good_exprs)}",
                        ]
                    )
                )
            elif kind == "NOT MATCHED":
                action = draw(
                    st.sampled_from(
                        [
                            "INSERT *",
                            f"INSERT (id, v, p) VALUES (s.id, {draw(good_values)}, s.p)",
                            "INSERT (id) VALUES (s.id + 100)",
                        ]
                    )
                )
            else:
                action = draw(
                    st.sampled_from(["DELETE", f"UPDATE SET v = {draw(good_values).replace('s.', 't.')}"])
                )
            parts.append(f"WHEN {kind}{cond} THEN {action}")
    if not parts:
        parts.append("WHEN NOT MATCHED THEN INSERT *")
    evo = draw(st.sampled_from(["", "", "WITH SCHEMA EVOLUTION "]))
    on = draw(
        st.sampled_from(
            [
                "t.id = s.id",
                "t.id = s.id AND t.p = 'a'",
                "t.id = s.x",
                "t.v = s.v OR t.id = s.id",
                "t.id = s.id AND s.x > 4",
                "t.p = s.p AND t.id = s.id",
            ]
        )
    )
    src = draw(st.sampled_from(["fuzz_s", "(SELECT * FROM fuzz_s)", "(SELECT * FROM fuzz_s WHERE x > 5)"]))
    return f"MERGE {evo}INTO fuzz_t t USING {src} s ON {on} " + " ".join(parts)


TOKENS = [
    "WHEN",
    "MATCHED",
    "NOT",
    "THEN",
    "AND",
    "OR",
    "(",
    ")",
    "`",
    "'",
    '"',
    "*",
    "=",
    ",",
    ";",
    "--",
    "/*",
    "NULL",
    "UPDATE",
    "SET",
    "INSERT",
    "VALUES",
    "DELETE",
    "BY",
    "SOURCE",
    "TARGET",
    "INTO",
    "USING",
    "ON",
    "MERGE",
    "WITH",
    "SCHEMA",
    "EVOLUTION",
    "EXPLAIN",
    "t.",
    "s.",
    ".",
    "\\",
    "\x00",
    "ü",
    "日本",
    "\n",
    "{",
    "}",
    "[",
    "]",
    "$",
    "?",
]


@st.composite
def mutated(draw) -> str:  # type: ignore[no-untyped-def]
    text = draw(statements)
    words = text.split(" ")
    for _ in range(draw(st.integers(1, 4))):
        if not words:
            break
        i = draw(st.integers(0, len(words) - 1))
        action = draw(st.sampled_from(["delete", "duplicate", "insert", "swap", "chars", "truncate"]))
        if action == "delete":
            del words[i]
        elif action == "duplicate":
            words.insert(i, words[i])
        elif action == "insert":
            words.insert(i, draw(st.sampled_from(TOKENS)))
        elif action == "swap":
            j = draw(st.integers(0, len(words) - 1))
            words[i], words[j] = words[j], words[i]
        elif action == "chars":
            words[i] = draw(st.text(min_size=0, max_size=5))
        else:
            words = words[: i + 1]
    return " ".join(words)


def _sql(spark, root: str, text: str, execute: bool) -> None:  # type: ignore[no-untyped-def]
    text = text.replace("{root}", root)
    if not execute and not text.lstrip().upper().startswith("EXPLAIN"):
        text = "EXPLAIN " + text
    if "MERGE" not in text.upper():
        return  # would go to spark.sql as some other statement: not the front end's business
    _run(lambda: deltamerge.sql(spark, text).collect())


def _grammar(spark, fuzz_table: str, text: str, execute: int) -> None:  # type: ignore[no-untyped-def]
    _sql(spark, fuzz_table, text, execute == 0)


def _mutation(spark, fuzz_table: str, text: str) -> None:  # type: ignore[no-untyped-def]
    _sql(spark, fuzz_table, text, False)


test_sql_grammar, test_soak_sql_grammar = _fuzz(
    _grammar, 80, text=st.one_of(statements, valid_statements()), execute=st.integers(0, 9)
)
test_sql_mutations, test_soak_sql_mutations = _fuzz(_mutation, 60, text=mutated())
test_sql_random_text, test_soak_sql_random_text = _fuzz(
    _mutation, 40, text=st.text(max_size=200).map(lambda t: "MERGE " + t)
)


# Inputs that once raised internal errors (TypeError, AttributeError, ValueError), found by the fuzzers
# above and fixed in sql_frontend.py.
FOUND = [
    "MERGE INTO fuzz_t t USING fuzz_s s ON t.id = s.id WHEN MATCHED THEN UPDATE *",  # TypeError
    "MERGE INTO fuzz_t t USING fuzz_s s ON t.id = s.id WHEN NOT MATCHED BY SOURCE THEN UPDATE *",
    "MERGE INTO fuzz_t t USING fuzz_s s ON t.id = s.id WHEN NOT MATCHED THEN INSERT",  # AttributeError
    "MERGE INTO fuzz_t t USING fuzz_s s ON t.id = s.id WHEN NOT MATCHED THEN INSERT VALUES (1)",
    "MERGE INTO VALUES t USING fuzz_s s ON t.id = s.id WHEN MATCHED THEN DELETE",
    "MERGE INTO fuzz_t t USING fuzz_s s ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v, $ s.b = 1",
    "MERGE INTO fuzz_t t USING fuzz_s s ON t.id = s.id WHEN NOT MATCHED THEN INSERT ($ s.b) VALUES (1)",
    "MERGE INTO delta.`/no/such/table` t USING fuzz_s s ON t.id = s.id WHEN MATCHED THEN DELETE",
]


@pytest.mark.parametrize("text", FOUND)
def test_found_by_fuzzing(spark, fuzz_table: str, text: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(DeltaMergeError) as err:
        deltamerge.sql(spark, text).collect()
    assert err.value.error_class in ("PARSE_SYNTAX_ERROR", "DELTA_MISSING_DELTA_TABLE"), str(err.value)


# --- the builder ---------------------------------------------------------------------------------------


def _conditions():  # type: ignore[no-untyped-def]
    return st.one_of(
        st.none(),
        exprs,
        st.sampled_from(["", "((", "t.id =", "s.id > 1", "t.v = s.v"]),
        st.sampled_from([0, 1.5, [1], {"a": 1}, b"x", True]),
        st.sampled_from(["col", "lit", "expr"]).map(
            lambda k: {"col": F.col("s.id") > 1, "lit": F.lit(True), "expr": F.expr("rand() > 0.5")}[k]
        ),
    )


def _dicts():  # type: ignore[no-untyped-def]
    keys = st.one_of(targets_cols, st.sampled_from(["", "(", "t.s.a.b", 1, None, ("v",)]))
    values = st.one_of(
        exprs, st.sampled_from([1, None, ["x"], "", "(("]), st.just("col").map(lambda _: F.col("s.v"))
    )
    return st.one_of(
        st.none(), st.dictionaries(keys, values, max_size=3), st.sampled_from(["v = 1", [("v", "1")], 5])
    )


calls = st.one_of(
    st.tuples(st.just("whenMatchedUpdate"), _conditions(), _dicts()),
    st.tuples(st.just("whenMatchedUpdateAll"), _conditions()),
    st.tuples(st.just("whenMatchedDelete"), _conditions()),
    st.tuples(st.just("whenNotMatchedInsert"), _conditions(), _dicts()),
    st.tuples(st.just("whenNotMatchedInsertAll"), _conditions()),
    st.tuples(st.just("whenNotMatchedBySourceUpdate"), _conditions(), _dicts()),
    st.tuples(st.just("whenNotMatchedBySourceDelete"), _conditions()),
    st.tuples(st.just("withSchemaEvolution")),
)


def _builder(spark, fuzz_table: str, condition, source_kind: str, sequence, finish: str) -> None:  # type: ignore[no-untyped-def]
    def go() -> None:
        source = {
            "view": lambda: spark.table("fuzz_s").alias("s"),
            "narrow": lambda: spark.table("fuzz_s").select("id", "v").alias("s"),
            "aliased": lambda: spark.table("fuzz_s").alias("src"),
            "none": lambda: None,
            "list": lambda: [1, 2],
        }[source_kind]()
        builder = DeltaTable.forPath(spark, fuzz_table).alias("t").merge(source, condition)
        for name, *args in sequence:
            builder = getattr(builder, name)(*args)
        if finish == "execute":
            builder.execute().collect()
        else:
            builder.explain()

    _run(go, builder_checks=True)


test_builder_sequences, test_soak_builder_sequences = _fuzz(
    _builder,
    80,
    condition=_conditions(),
    source_kind=st.sampled_from(["view", "narrow", "aliased", "none", "list"]),
    sequence=st.lists(calls, max_size=5),
    finish=st.sampled_from(["explain", "explain", "explain", "explain", "execute"]),
)
