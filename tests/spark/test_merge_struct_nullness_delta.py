"""Delta Lake's struct-evolution nullness MERGE suite (delta-io/delta
``MergeIntoStructEvolutionNullnessSuite.scala``), as data.

The suite checks that MERGE with schema evolution keeps a NULL struct apart from a struct of NULLs when
it evolves or casts struct columns: top-level structs, structs nested in structs, arrays and maps of
structs (top-level and nested in a struct), and several clauses in one MERGE. Every Delta test has
one source row and at most one target row, all with ``key`` 1 and a column ``col`` (plus ``extra`` in
the multi-clause tests), written as JSON and read with an explicit schema like Delta's
``readFromJSON`` (so, as there, every column read is nullable: the "non-nullable target struct" case
really starts from a nullable struct). The generated cases (source kind x target kind x action) use
Delta's generator rules, ported as the ``_expect_*`` functions below.

Each Delta test runs twice there (``testNestedStructsEvolution``): with
``spark.databricks.delta.schema.autoMerge.enabled`` off the MERGE must fail (``Cannot cast`` /
``Cannot resolve``), with it on the table must hold the expected rows with exactly the expected
schema. Both halves are checked here, on the same table (the failed MERGE must leave it at its
version). MERGE runs as SQL against ``delta.`path```, the source being the temp view ``source``
(Delta's generated ``...SQLNameBasedSuite`` uses a catalog table name instead).

To stay fast, the Delta tests that share target schema, source schema and clauses run as one MERGE:
each gets its own ``key`` (its rows are renumbered), and since every clause joins on ``t.key = s.key``
a row's outcome does not depend on the others; a mismatch names the Delta test. The multi-clause tests
(whose clause conditions name keys 1 and 2) each run alone.

Variants: Delta's generated suites run only the default configuration, both
``spark.databricks.delta.merge.preserveNullSourceStructs`` and
``spark.databricks.delta.merge.preserveNullSourceStructs.updateStar`` true (set explicitly, as
Delta's tests do): every Delta test is ported for it (328 tests in 37 MERGEs). deltamerge honours both
legacy flags (``merge/casting.py: CastSettings.from_conf``), so the suite's own expectations for them
(its ``preserveNullSourceStructs*`` knobs, which no generated suite turns off) are ported too, for
the Delta tests whose expected rows differ from the default's: ``updateStar=false`` (true / false),
all of them; ``preserve=false`` (false / false), the groups in ``PRESERVE_OFF_GROUPS`` and the
multi-clause tests.

Not ported: the other 77 ``preserve=false`` expectations (22 more MERGEs: the remaining family /
clause combinations, e.g. ``nested struct - UPDATE t.col = s.col`` or the INSERT clauses of the
array / map families), left out only to keep the file fast; they exercise the same NULL-expansion
paths as the groups that run. The ``preserve=false`` / ``updateStar=true`` combination is not run
separately (with the first flag off the second has no effect, in Delta and here).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pytest

import deltamerge

pytestmark = pytest.mark.spark

AUTO_MERGE = "spark.databricks.delta.schema.autoMerge.enabled"
PRESERVE = "spark.databricks.delta.merge.preserveNullSourceStructs"
PRESERVE_STAR = "spark.databricks.delta.merge.preserveNullSourceStructs.updateStar"


@dataclass(frozen=True)
class Flags:
    """Delta's ``preserveNullSourceStructs`` / ``preserveNullSourceStructsUpdateStar`` test knobs."""

    name: str
    preserve: bool
    update_star: bool

    @property
    def confs(self) -> dict[str, str]:
        return {PRESERVE: str(self.preserve).lower(), PRESERVE_STAR: str(self.update_star).lower()}

    @property
    def whole(self) -> bool:
        """Whole-struct assignments (``UPDATE t.col = s.col``, INSERT) keep a NULL source struct."""
        return self.preserve

    @property
    def star(self) -> bool:
        """``UPDATE *`` keeps a NULL source struct."""
        return self.preserve and self.update_star


DEFAULT = Flags("default", True, True)
NO_UPDATE_STAR = Flags("updateStar=false", True, False)
NO_PRESERVE = Flags("preserve=false", False, False)
VARIANTS = (DEFAULT, NO_UPDATE_STAR, NO_PRESERVE)


@dataclass(frozen=True)
class Scenario:
    """One Delta test: target / source rows and expected rows as JSON, schemas as DDL."""

    name: str
    group: str  # scenarios of one group share schemas and clauses and run as one MERGE
    target_schema: str
    source_schema: str
    target: tuple[str, ...]
    source: tuple[str, ...]
    clauses: tuple[str, ...]
    result: tuple[str, ...]
    result_schema: str
    error_without_evolution: str = "Cannot cast"
    batchable: bool = True  # False: the clauses name keys, so the scenario keeps its own rows


def update(set_: str, condition: str | None = None) -> str:
    cond = f" AND {condition}" if condition else ""
    return f"WHEN MATCHED{cond} THEN UPDATE SET {set_}"


def insert(values: str) -> str:
    return f"WHEN NOT MATCHED THEN INSERT {values}"


# --- actions, source and target kinds (Delta's ActionType / SourceType / TargetType) ---------------

UPDATE_STAR, UPDATE_COL, UPDATE_COL_Y, INSERT_STAR, INSERT_COL = (
    "UPDATE *",
    "UPDATE t.col = s.col",
    "UPDATE t.col.y = s.col.y",
    "INSERT *",
    "INSERT col",
)
CLAUSE = {
    UPDATE_STAR: update("*"),
    UPDATE_COL: update("t.col = s.col"),
    UPDATE_COL_Y: update("t.col.y = s.col.y"),
    INSERT_STAR: insert("*"),
    INSERT_COL: insert("(key, col) VALUES (s.key, s.col)"),
}
WHOLE_STRUCT = {UPDATE_COL, INSERT_STAR, INSERT_COL}
INSERTS = {INSERT_STAR, INSERT_COL}

S_NON_NULL, S_NULL_LEAVES, S_NULL_STRUCT, S_NULL_ARRAY, S_NULL_MAP, S_NULL_COL = (
    "non-null source leaves",
    "null source leaves",
    "null source nested struct",
    "null source nested array",
    "null source nested map",
    "null source col",
)
# Delta's display names, copied as they are (its nested array / map target kinds say "source").
T_NON_NULL, T_NULL_LEAVES, T_NULL_STRUCT, T_NULL_ARRAY, T_NULL_MAP, T_NULL_COL, T_EMPTY = (
    "non-null target leaves",
    "null target leaves",
    "null target nested struct",
    "null source nested array",
    "null source nested map",
    "null target col",
    "empty target",
)

ABSENT: Any = object()  # no target row (INSERT): Delta's ``None`` target option


def get(value: Any, name: str) -> Any:
    """A field of a JSON object, NULL if the object is NULL (Delta's ``getNestedValue``)."""
    return None if value is None else value[name]


def overwrite_with_null(source: Any, target: Any, action: str, flags: Flags) -> bool:
    """Whether the target struct becomes NULL (Delta's ``shouldOverwriteWithNull``)."""
    return (
        source is None
        and flags.preserve
        and (
            target is ABSENT
            or action in WHOLE_STRUCT
            or (action == UPDATE_STAR and flags.update_star and target is None)
        )
    )


def _col(row: Any) -> Any:
    return ABSENT if row is ABSENT else row["col"]


def _row(col: Any) -> str:
    return json.dumps({"key": 1, "col": col})


def _expect_top_level_struct(source: Any, target: Any, action: str, flags: Flags) -> str:
    s_col, t_col = source["col"], _col(target)
    if overwrite_with_null(s_col, t_col, action, flags):
        return _row(None)
    z = get(t_col, "z") if action == UPDATE_STAR else None
    return _row({"y": get(s_col, "y"), "z": z, "x": get(s_col, "x")})


def _expect_nested_struct(source: Any, target: Any, action: str, flags: Flags) -> str:
    s_col, t_col = source["col"], _col(target)
    if overwrite_with_null(s_col, t_col, action, flags):
        return _row(None)
    s_x = get(s_col, "x")
    if action == UPDATE_STAR and s_x is None:
        x = None if flags.star else {"a": None, "b": None}
    else:
        x = s_x
    s_y = get(s_col, "y")
    t_y = ABSENT if t_col is ABSENT else get(t_col, "y")
    if overwrite_with_null(s_y, t_y, action, flags):
        y = None
    elif action == UPDATE_STAR:
        y = {"d": get(s_y, "d"), "e": get(t_y, "e"), "c": get(s_y, "c")}
    elif s_y is None and flags.whole:
        y = None
    else:
        y = {"d": get(s_y, "d"), "e": None, "c": get(s_y, "c")}
    z = get(t_col, "z") if action in (UPDATE_STAR, UPDATE_COL_Y) else None
    col = {"y": y, "z": z} if action == UPDATE_COL_Y else {"y": y, "z": z, "x": x}
    return _row(col)


def _evolve_element(value: Any, names: tuple[str, str, str], flags: Flags) -> Any:
    """An array element / map value struct cast to the evolved type: the target-only field (the
    middle name) is NULL; a NULL struct stays NULL unless ``preserve`` is off."""
    kept, added, new = names
    if value is None:
        return None if flags.whole else dict.fromkeys(names)
    return {kept: value[kept], added: None, new: value[new]}


def _evolve_collection(value: Any, names: tuple[str, str, str], flags: Flags) -> Any:
    if value is None:
        return None
    if isinstance(value, list):
        return [_evolve_element(v, names, flags) for v in value]
    return {k: _evolve_element(v, names, flags) for k, v in value.items()}


def _expect_top_level_collection(source: Any, target: Any, action: str, flags: Flags) -> str:
    return _row(_evolve_collection(source["col"], ("y", "z", "x"), flags))


def _expect_nested_collection(source: Any, target: Any, action: str, flags: Flags) -> str:
    s_col, t_col = source["col"], _col(target)
    if overwrite_with_null(s_col, t_col, action, flags):
        return _row(None)
    y = _evolve_collection(get(s_col, "y"), ("d", "e", "c"), flags)
    z = get(t_col, "z") if action in (UPDATE_STAR, UPDATE_COL_Y) else None
    col = {"y": y, "z": z} if action == UPDATE_COL_Y else {"y": y, "z": z, "x": get(s_col, "x")}
    return _row(col)


@dataclass(frozen=True)
class Family:
    """One of Delta's generated test families (``generateStructEvolutionNullnessTests``)."""

    prefix: str
    target_schema: str
    source_schema: str
    sources: dict[str, str]
    targets: dict[str, str]  # UPDATE target kinds; INSERTs use the empty target
    actions: tuple[str, ...]
    result_schema: str
    expect: Any
    col_y_result_schema: str | None = None

    def scenario(self, name: str, action: str, **kw: Any) -> Scenario:
        """An explicit Delta test of this family (schemas default to the family's)."""
        schema = self.col_y_result_schema if action == UPDATE_COL_Y else self.result_schema
        defaults: dict[str, Any] = {
            "group": f"{self.prefix}{action}",
            "target_schema": self.target_schema,
            "source_schema": self.source_schema,
            "clauses": (CLAUSE[action],),
            "result_schema": schema,
        }
        defaults.update(kw)
        return Scenario(name=f"{self.prefix}{name}", **defaults)

    def generated(self, flags: Flags) -> list[Scenario]:
        out = []
        for action in self.actions:
            targets = {T_EMPTY: None} if action in INSERTS else self.targets
            for s_kind, s_row in self.sources.items():
                for t_kind, t_row in targets.items():
                    target = ABSENT if t_row is None else json.loads(t_row)
                    result = self.expect(json.loads(s_row), target, action, flags)
                    out.append(
                        self.scenario(
                            f"{s_kind}, {t_kind}, {action}",
                            action,
                            target=() if t_row is None else (t_row,),
                            source=(s_row,),
                            result=(result,),
                        )
                    )
        return out


def _pick(flag: bool, preserved: str, expanded: str) -> tuple[str]:
    return (preserved if flag else expanded,)


# --- top-level struct --------------------------------------------------------------------------------

TOP_STRUCT = Family(
    prefix="top-level struct - ",
    target_schema="key int, col struct<y:int, z:int>",
    source_schema="key int, col struct<x:int, y:int>",
    sources={
        S_NON_NULL: '{"key":1,"col":{"x":1,"y":1}}',
        S_NULL_LEAVES: '{"key":1,"col":{"x":null,"y":null}}',
        S_NULL_COL: '{"key":1,"col":null}',
    },
    targets={
        T_NON_NULL: '{"key":1,"col":{"y":2,"z":2}}',
        T_NULL_LEAVES: '{"key":1,"col":{"y":null,"z":null}}',
        T_NULL_COL: '{"key":1,"col":null}',
    },
    actions=(UPDATE_STAR, UPDATE_COL, INSERT_STAR, INSERT_COL),
    result_schema="key int, col struct<y:int, z:int, x:int>",
    expect=_expect_top_level_struct,
)

NULL_COL = '{"key":1,"col":null}'


def _top_struct_explicit(f: Flags) -> list[Scenario]:
    fam = TOP_STRUCT
    expanded = '{"key":1,"col":{"y":null,"z":null,"x":null}}'
    whole = _pick(f.whole, NULL_COL, expanded)
    multi_target = "key int, col struct<y:int, z:int, w:int>"
    multi_result = "key int, col struct<y:int, z:int, w:int, x:int>"
    no_target_only = "key int, col struct<Y:int>"
    return [
        fam.scenario(
            "null expansion - UPDATE * with null target col",
            UPDATE_STAR,
            target=(NULL_COL,),
            source=(NULL_COL,),
            result=_pick(f.star, NULL_COL, expanded),
        ),
        fam.scenario(
            "null expansion - UPDATE * with non-null target col",
            UPDATE_STAR,
            target=('{"key":1,"col":{"y":null,"z":null}}',),
            source=(NULL_COL,),
            result=(expanded,),
        ),
        fam.scenario(
            "null expansion - UPDATE * with non-null target col without target-only field",
            UPDATE_STAR,
            group=f"{fam.prefix}UPDATE * without target-only field",
            target_schema=no_target_only,  # upper-case Y: names compare case-insensitively
            target=('{"key":1,"col":{"Y":null}}',),
            source=(NULL_COL,),
            # Delta's expanded row spells the field "y", which its JSON reader does not match to
            # "Y": the field is NULL either way.
            result=_pick(f.star, NULL_COL, '{"key":1,"col":{"Y":null,"x":null}}'),
            result_schema="key int, col struct<Y:int, x:int>",
        ),
        fam.scenario(
            "null expansion - UPDATE t.col = s.col",
            UPDATE_COL,
            target=('{"key":1,"col":{"y":2,"z":2}}',),
            source=(NULL_COL,),
            result=whole,
        ),
        fam.scenario("null expansion - INSERT *", INSERT_STAR, target=(), source=(NULL_COL,), result=whole),
        fam.scenario(
            "null expansion - INSERT (key, col)", INSERT_COL, target=(), source=(NULL_COL,), result=whole
        ),
        fam.scenario(
            "non-nullable target struct becomes nullable",
            UPDATE_COL,
            group=f"{fam.prefix}UPDATE t.col = s.col, NOT NULL target struct",
            target_schema="key int, col struct<y:int, z:int> NOT NULL",
            target=('{"key":1,"col":{"y":2,"z":2}}',),
            source=(NULL_COL,),
            result=whole,
        ),
        *(
            fam.scenario(
                f"multiple target-only fields - UPDATE * with {what}",
                UPDATE_STAR,
                group=f"{fam.prefix}UPDATE * with several target-only fields",
                target_schema=multi_target,
                target=(json.dumps({"key": 1, "col": {"y": 2, "z": z, "w": w}}),),
                source=(NULL_COL,),
                result=(json.dumps({"key": 1, "col": {"y": None, "z": z, "w": w, "x": None}}),),
                result_schema=multi_result,
            )
            for what, z, w in (
                ("all target-only fields null", None, None),
                ("a non-null target-only field", 5, None),
                ("non-null target-only fields", 5, 6),
            )
        ),
    ]


# --- struct nested in a struct ----------------------------------------------------------------------

NESTED_STRUCT = Family(
    prefix="nested struct - ",
    target_schema="key int, col struct<y:struct<d:int, e:int>, z:struct<f:int, g:int>>",
    source_schema="key int, col struct<x:struct<a:int, b:int>, y:struct<c:int, d:int>>",
    sources={
        S_NON_NULL: '{"key":1,"col":{"x":{"a":10,"b":20},"y":{"c":30,"d":40}}}',
        S_NULL_LEAVES: '{"key":1,"col":{"x":{"a":null,"b":null},"y":{"c":null,"d":null}}}',
        S_NULL_STRUCT: '{"key":1,"col":{"x":null,"y":null}}',
        S_NULL_COL: NULL_COL,
    },
    targets={
        T_NON_NULL: '{"key":1,"col":{"y":{"d":4,"e":5},"z":{"f":6,"g":7}}}',
        T_NULL_LEAVES: '{"key":1,"col":{"y":{"d":null,"e":null},"z":{"f":null,"g":null}}}',
        T_NULL_STRUCT: '{"key":1,"col":{"y":null,"z":null}}',
        T_NULL_COL: NULL_COL,
    },
    actions=(UPDATE_STAR, UPDATE_COL, UPDATE_COL_Y, INSERT_STAR, INSERT_COL),
    result_schema=(
        "key int, col struct<y:struct<d:int, e:int, c:int>, z:struct<f:int, g:int>, x:struct<a:int, b:int>>"
    ),
    col_y_result_schema="key int, col struct<y:struct<d:int, e:int, c:int>, z:struct<f:int, g:int>>",
    expect=_expect_nested_struct,
)


def _nested_struct_explicit(f: Flags) -> list[Scenario]:
    fam = NESTED_STRUCT
    expanded_y = {"d": None, "e": None, "c": None}
    expanded_x = {"a": None, "b": None}

    def star(name: str, target: str, preserved: Any, expanded: Any, **kw: Any) -> Scenario:
        return fam.scenario(
            f"null expansion - UPDATE * with {name}",
            UPDATE_STAR,
            target=(target,),
            source=(NULL_COL,),
            result=(_row(preserved if f.star else expanded),),
            **kw,
        )

    no_z = {
        "group": f"{fam.prefix}UPDATE * without col.z",
        "target_schema": "key int, col struct<y:struct<d:int, e:int>>",
        "result_schema": "key int, col struct<y:struct<d:int, e:int, c:int>, x:struct<a:int, b:int>>",
    }
    no_target_only = {
        "group": f"{fam.prefix}UPDATE * without target-only fields",
        "target_schema": "key int, col struct<y:struct<d:int>>",
        "result_schema": "key int, col struct<y:struct<d:int, c:int>, x:struct<a:int, b:int>>",
    }
    no_target_only_expanded = {"y": {"d": None, "c": None}, "x": expanded_x}
    whole = _pick(f.whole, NULL_COL, _row({"y": expanded_y, "z": None, "x": None}))
    return [
        star("null target col", NULL_COL, None, {"y": expanded_y, "z": None, "x": expanded_x}),
        star(
            "null target nested structs",
            '{"key":1,"col":{"y":null,"z":null}}',
            {"y": None, "z": None, "x": None},
            {"y": expanded_y, "z": None, "x": expanded_x},
        ),
        star(
            "null target leaves",
            '{"key":1,"col":{"y":{"d":null,"e":null},"z":{"f":null,"g":null}}}',
            {"y": expanded_y, "z": {"f": None, "g": None}, "x": None},
            {"y": expanded_y, "z": {"f": None, "g": None}, "x": expanded_x},
        ),
        star(
            "null target nested structs without col.z",
            '{"key":1,"col":{"y":null}}',
            {"y": None, "x": None},
            {"y": expanded_y, "x": expanded_x},
            **no_z,
        ),
        star(
            "null target leaves without col.z",
            '{"key":1,"col":{"y":{"d":null,"e":null}}}',
            {"y": expanded_y, "x": None},
            {"y": expanded_y, "x": expanded_x},
            **no_z,
        ),
        star(
            "null target without target-only fields",
            '{"key":1,"col":{"y":null}}',
            None,
            no_target_only_expanded,
            **no_target_only,
        ),
        star(
            "null target nested structs without target-only fields",
            '{"key":1,"col":{"y":null}}',
            None,
            no_target_only_expanded,
            **no_target_only,
        ),
        star(
            "null target leaves without target-only fields",
            '{"key":1,"col":{"y":{"d":null}}}',
            None,
            no_target_only_expanded,
            **no_target_only,
        ),
        fam.scenario(
            "null expansion - UPDATE t.col = s.col",
            UPDATE_COL,
            target=('{"key":1,"col":{"y":{"d":2,"e":2},"z":{"f":2,"g":2}}}',),
            source=(NULL_COL,),
            result=whole,
        ),
        fam.scenario("null expansion - INSERT *", INSERT_STAR, target=(), source=(NULL_COL,), result=whole),
        fam.scenario(
            "null expansion - INSERT (key, col)", INSERT_COL, target=(), source=(NULL_COL,), result=whole
        ),
    ]


# --- arrays and maps of structs, top-level ----------------------------------------------------------

TOP_ARRAY = Family(
    prefix="top-level array-of-struct - ",
    target_schema="key int, col array<struct<y:int, z:int>>",
    source_schema="key int, col array<struct<x:int, y:int>>",
    sources={
        S_NON_NULL: '{"key":1,"col":[{"x":10,"y":20},{"x":30,"y":40}]}',
        S_NULL_LEAVES: '{"key":1,"col":[{"x":null,"y":null},{"x":null,"y":null}]}',
        S_NULL_STRUCT: '{"key":1,"col":[null,null]}',
        S_NULL_COL: NULL_COL,
    },
    targets={T_NON_NULL: '{"key":1,"col":[{"y":2,"z":3},{"y":4,"z":5}]}'},
    actions=(UPDATE_STAR, UPDATE_COL, INSERT_STAR, INSERT_COL),
    result_schema="key int, col array<struct<y:int, z:int, x:int>>",
    expect=_expect_top_level_collection,
)

TOP_MAP = Family(
    prefix="top-level map-of-struct - ",
    target_schema="key int, col map<string, struct<y:int, z:int>>",
    source_schema="key int, col map<string, struct<x:int, y:int>>",
    sources={
        S_NON_NULL: '{"key":1,"col":{"k1":{"x":10,"y":20},"k2":{"x":30,"y":40}}}',
        S_NULL_LEAVES: '{"key":1,"col":{"k1":{"x":null,"y":null},"k2":{"x":null,"y":null}}}',
        S_NULL_STRUCT: '{"key":1,"col":{"k1":null,"k2":null}}',
        S_NULL_COL: NULL_COL,
    },
    targets={T_NON_NULL: '{"key":1,"col":{"k2":{"y":2,"z":3},"k3":{"y":4,"z":5}}}'},
    actions=(UPDATE_STAR, UPDATE_COL, INSERT_STAR, INSERT_COL),
    result_schema="key int, col map<string, struct<y:int, z:int, x:int>>",
    expect=_expect_top_level_collection,
)


def _top_collection_explicit(fam: Family, f: Flags, target: str, source: str, null_elem: str) -> list:
    """``null_elem`` is the JSON of the collection holding one NULL struct, with ``%s`` for it."""
    expanded = _row(json.loads(null_elem % '{"y":null,"z":null,"x":null}'))
    whole = _pick(f.whole, _row(json.loads(null_elem % "null")), expanded)
    return [
        fam.scenario(
            "null expansion - UPDATE *", UPDATE_STAR, target=(target,), source=(source,), result=whole
        ),
        fam.scenario(
            "null expansion - UPDATE t.col = s.col",
            UPDATE_COL,
            target=(target,),
            source=(source,),
            result=whole,
        ),
        fam.scenario("null expansion - INSERT *", INSERT_STAR, target=(), source=(source,), result=whole),
        fam.scenario(
            "null expansion - INSERT (key, col)", INSERT_COL, target=(), source=(source,), result=whole
        ),
    ]


def _top_array_explicit(f: Flags) -> list[Scenario]:
    return _top_collection_explicit(
        TOP_ARRAY, f, '{"key":1,"col":[{"y":2,"z":2}]}', '{"key":1,"col":[null]}', "[%s]"
    )


def _top_map_explicit(f: Flags) -> list[Scenario]:
    return _top_collection_explicit(
        TOP_MAP, f, '{"key":1,"col":{"k1":{"y":2,"z":2}}}', '{"key":1,"col":{"k1":null}}', '{"k1":%s}'
    )


# --- arrays and maps of structs nested in a struct --------------------------------------------------

NESTED_ARRAY = Family(
    prefix="nested array-of-struct - ",
    target_schema="key int, col struct<y:array<struct<d:int, e:int>>, z:array<struct<f:int, g:int>>>",
    source_schema="key int, col struct<x:array<struct<a:int, b:int>>, y:array<struct<c:int, d:int>>>",
    sources={
        S_NON_NULL: '{"key":1,"col":{"x":[{"a":10,"b":20}],"y":[{"c":30,"d":40}]}}',
        S_NULL_LEAVES: '{"key":1,"col":{"x":[{"a":null,"b":null}],"y":[{"c":null,"d":null}]}}',
        S_NULL_STRUCT: '{"key":1,"col":{"x":[null],"y":[null]}}',
        S_NULL_ARRAY: '{"key":1,"col":{"x":null,"y":null}}',
        S_NULL_COL: NULL_COL,
    },
    targets={
        T_NON_NULL: '{"key":1,"col":{"y":[{"d":4,"e":5}],"z":[{"f":6,"g":7}]}}',
        T_NULL_LEAVES: '{"key":1,"col":{"y":[{"d":null,"e":null}],"z":[{"f":null,"g":null}]}}',
        T_NULL_STRUCT: '{"key":1,"col":{"y":[null],"z":[null]}}',
        T_NULL_ARRAY: '{"key":1,"col":{"y":null,"z":null}}',
        T_NULL_COL: NULL_COL,
    },
    actions=(UPDATE_STAR, UPDATE_COL, UPDATE_COL_Y, INSERT_STAR, INSERT_COL),
    result_schema=(
        "key int, col struct<y:array<struct<d:int, e:int, c:int>>, z:array<struct<f:int, g:int>>, "
        "x:array<struct<a:int, b:int>>>"
    ),
    col_y_result_schema=(
        "key int, col struct<y:array<struct<d:int, e:int, c:int>>, z:array<struct<f:int, g:int>>>"
    ),
    expect=_expect_nested_collection,
)

NESTED_MAP = Family(
    prefix="nested map-of-struct - ",
    target_schema=(
        "key int, col struct<y:map<string, struct<d:int, e:int>>, z:map<string, struct<f:int, g:int>>>"
    ),
    source_schema=(
        "key int, col struct<x:map<string, struct<a:int, b:int>>, y:map<string, struct<c:int, d:int>>>"
    ),
    sources={
        S_NON_NULL: '{"key":1,"col":{"x":{"k1":{"a":10,"b":20}},"y":{"k1":{"c":30,"d":40}}}}',
        S_NULL_LEAVES: '{"key":1,"col":{"x":{"k1":{"a":null,"b":null}},"y":{"k1":{"c":null,"d":null}}}}',
        S_NULL_STRUCT: '{"key":1,"col":{"x":{"k1":null},"y":{"k1":null}}}',
        S_NULL_MAP: '{"key":1,"col":{"x":null,"y":null}}',
        S_NULL_COL: NULL_COL,
    },
    targets={
        T_NON_NULL: '{"key":1,"col":{"y":{"k2":{"d":4,"e":5}},"z":{"k2":{"f":6,"g":7}}}}',
        T_NULL_LEAVES: '{"key":1,"col":{"y":{"k2":{"d":null,"e":null}},"z":{"k2":{"f":null,"g":null}}}}',
        T_NULL_STRUCT: '{"key":1,"col":{"y":{"k2":null},"z":{"k2":null}}}',
        T_NULL_MAP: '{"key":1,"col":{"y":null,"z":null}}',
        T_NULL_COL: NULL_COL,
    },
    actions=(UPDATE_STAR, UPDATE_COL, UPDATE_COL_Y, INSERT_STAR, INSERT_COL),
    result_schema=(
        "key int, col struct<y:map<string, struct<d:int, e:int, c:int>>, "
        "z:map<string, struct<f:int, g:int>>, x:map<string, struct<a:int, b:int>>>"
    ),
    col_y_result_schema=(
        "key int, col struct<y:map<string, struct<d:int, e:int, c:int>>, z:map<string, struct<f:int, g:int>>>"
    ),
    expect=_expect_nested_collection,
)


def _nested_collection_explicit(
    fam: Family, f: Flags, kind: str, full_target: str, nested: tuple[str, str, str]
) -> list[Scenario]:
    """``nested``: a target, a source with NULL structs inside its collections (of ``kind``), and the
    expected result's JSON with ``%s`` for the evolved NULL struct of ``col.y``."""
    nested_target, nested_source, nested_result = nested
    expanded_col = _row({"y": None, "z": None, "x": None})
    whole = _pick(f.whole, NULL_COL, expanded_col)
    return [
        fam.scenario(
            "null expansion - UPDATE * with null target col struct",
            UPDATE_STAR,
            target=(NULL_COL,),
            source=(NULL_COL,),
            result=_pick(f.star, NULL_COL, expanded_col),
        ),
        fam.scenario(
            "null expansion - UPDATE * with non-null target col struct",
            UPDATE_STAR,
            target=('{"key":1,"col":{"y":null,"z":null}}',),
            source=(NULL_COL,),
            result=(expanded_col,),
        ),
        fam.scenario(
            f"null expansion - UPDATE * with null structs nested in source {kind}",
            UPDATE_STAR,
            target=(nested_target,),
            source=(nested_source,),
            result=_pick(f.preserve, nested_result % "null", nested_result % '{"d":null,"e":null,"c":null}'),
        ),
        fam.scenario(
            "null expansion - UPDATE t.col = s.col",
            UPDATE_COL,
            target=(full_target,),
            source=(NULL_COL,),
            result=whole,
        ),
        fam.scenario("null expansion - INSERT *", INSERT_STAR, target=(), source=(NULL_COL,), result=whole),
        fam.scenario(
            "null expansion - INSERT (key, col)", INSERT_COL, target=(), source=(NULL_COL,), result=whole
        ),
    ]


def _nested_array_explicit(f: Flags) -> list[Scenario]:
    return _nested_collection_explicit(
        NESTED_ARRAY,
        f,
        "array",
        '{"key":1,"col":{"y":[{"d":2,"e":2}],"z":[{"f":2,"g":2}]}}',
        (
            '{"key":1,"col":{"y":[{"d":1,"e":2},{"d":null,"e":null}],"z":[null]}}',
            '{"key":1,"col":{"x":[null],"y":[null]}}',
            '{"key":1,"col":{"y":[%s],"z":[null],"x":[null]}}',
        ),
    )


def _nested_map_explicit(f: Flags) -> list[Scenario]:
    return _nested_collection_explicit(
        NESTED_MAP,
        f,
        "map",
        '{"key":1,"col":{"y":{"k1":{"d":2,"e":2}},"z":{"k1":{"f":2,"g":2}}}}',
        (
            '{"key":1,"col":{"y":{"k2":{"d":1,"e":2},"k3":{"d":null,"e":null}},"z":{"k2":null}}}',
            '{"key":1,"col":{"x":{"k1":null},"y":{"k1":null}}}',
            '{"key":1,"col":{"y":{"k1":%s},"z":{"k2":null},"x":{"k1":null}}}',
        ),
    )


# --- several clauses --------------------------------------------------------------------------------

MULTI_TARGET = "key int, col struct<y:int, z:int>"
MULTI_SOURCE = "key int, col struct<x:int, y:int>, extra struct<val:int, val2:int>"
MULTI_RESULT = "key int, col struct<y:int, z:int, x:int>, extra struct<val:int, val2:int>"


def _multi_clause(f: Flags) -> list[Scenario]:
    prefix = (
        f"multiple clauses - preserveNullSourceStructs={str(f.preserve).lower()} - "
        f"preserveNullSourceStructsUpdateStar={str(f.update_star).lower()} - "
    )
    nulls = ('{"key":1,"col":null,"extra":null}', '{"key":2,"col":null,"extra":null}')
    col = '"col":{"y":null,"z":null,"x":null}'
    extra = '"extra":{"val":null,"val2":null}'
    expanded_1 = f'{{"key":1,{col},{extra}}}'
    expanded_2 = f'{{"key":2,{col},{extra}}}'
    expanded_2_null_extra = f'{{"key":2,{col},"extra":null}}'
    set_col = update("col = s.col", "s.key = 1")

    def case(name: str, second: str, result: tuple[str, ...], **kw: Any) -> Scenario:
        return Scenario(
            name=prefix + name,
            group=f"multiple clauses - {name}",
            target_schema=MULTI_TARGET,
            source_schema=MULTI_SOURCE,
            target=kw.pop("target", (NULL_COL, '{"key":2,"col":null}')),
            source=nulls,
            clauses=(set_col, second),
            result=result,
            result_schema=kw.pop("result_schema", MULTI_RESULT),
            batchable=False,
            **kw,
        )

    if f.star:
        star_result = nulls
    elif f.whole:
        star_result = (nulls[0], expanded_2)
    else:
        star_result = (expanded_1, expanded_2)
    return [
        case(
            "UPDATE SET col = s.col, UPDATE SET extra = s.extra",
            update("extra = s.extra", "s.key = 2"),
            nulls if f.whole else (expanded_1, expanded_2_null_extra),
            error_without_evolution="Cannot resolve",
        ),
        case(
            "UPDATE SET col = s.col, UPDATE SET extra.val = s.extra.val",
            update("extra.val = s.extra.val", "s.key = 2"),
            (
                (nulls[0], '{"key":2,"col":null,"extra":{"val":null}}')
                if f.whole
                else (
                    f'{{"key":1,{col},"extra":{{"val":null}}}}',
                    f'{{"key":2,{col},"extra":{{"val":null}}}}',
                )
            ),
            result_schema="key int, col struct<y:int, z:int, x:int>, extra struct<val:int>",
            error_without_evolution="Cannot resolve",
        ),
        case("UPDATE SET col = s.col, UPDATE SET *", update("*", "s.key = 2"), star_result),
        case(
            "UPDATE SET col = s.col, INSERT (key, col, extra)",
            insert("(key, col, extra) VALUES (s.key, s.col, s.extra)"),
            nulls if f.whole else (expanded_1, expanded_2_null_extra),
            target=(NULL_COL,),
            error_without_evolution="Cannot resolve",
        ),
        case(
            "UPDATE SET col = s.col, INSERT *",
            insert("*"),
            nulls if f.whole else (expanded_1, expanded_2_null_extra),
            target=(NULL_COL,),
        ),
    ]


FAMILIES = (TOP_STRUCT, NESTED_STRUCT, TOP_ARRAY, NESTED_ARRAY, TOP_MAP, NESTED_MAP)
EXPLICIT = (
    _top_struct_explicit,
    _nested_struct_explicit,
    _top_array_explicit,
    _nested_array_explicit,
    _top_map_explicit,
    _nested_map_explicit,
    _multi_clause,
)


def scenarios(flags: Flags) -> list[Scenario]:
    out = [s for fam in FAMILIES for s in fam.generated(flags)]
    out += [s for make in EXPLICIT for s in make(flags)]
    return out


# Delta tests deltamerge gets wrong: (variant name, Delta test name) -> reason.
# (variant, Delta test) pairs deltamerge gets wrong -> reason.
XFAIL: dict[tuple[str, str], str] = {}


# The ``preserve=false`` variant changes most groups; to keep the file fast it runs one or two
# groups per family (each kind of NULL expansion: whole-struct casts, UPDATE * field by field, array
# elements, map values, nested assignments) and all multi-clause tests.
PRESERVE_OFF_GROUPS = {
    "top-level struct - UPDATE *",
    "top-level struct - UPDATE t.col = s.col",
    "top-level struct - INSERT *",
    "nested struct - UPDATE *",
    "nested struct - UPDATE t.col.y = s.col.y",
    "top-level array-of-struct - UPDATE t.col = s.col",
    "top-level map-of-struct - INSERT col",
    "nested array-of-struct - UPDATE *",
    "nested map-of-struct - UPDATE t.col = s.col",
}


def _runs(flags: Flags, group: str) -> bool:
    if flags is NO_PRESERVE:
        return group in PRESERVE_OFF_GROUPS or group.startswith("multiple clauses")
    return True


@dataclass(frozen=True)
class Group:
    """Delta tests run as one MERGE (same schemas and clauses)."""

    flags: Flags
    label: str
    cases: tuple[Scenario, ...]
    xfail: str | None = None


def _multi_clause_name(name: str) -> str:
    """Multi-clause names spell the flags; compare them across variants without that part."""
    return name.split(" - ", 3)[-1] if name.startswith("multiple clauses") else name


def _groups() -> list[Group]:
    default = {_multi_clause_name(s.name): s.result for s in scenarios(DEFAULT)}
    assert len(default) == len(scenarios(DEFAULT)), "Delta test names are unique"
    grouped: dict[tuple[str, str, str | None], list[Scenario]] = {}
    flags_of = {f.name: f for f in VARIANTS}
    for flags in VARIANTS:
        for sc in scenarios(flags):
            if flags is not DEFAULT and default[_multi_clause_name(sc.name)] == sc.result:
                continue  # the legacy variants run only what the flag changes
            if not _runs(flags, sc.group):
                continue
            reason = XFAIL.get((flags.name, sc.name))
            grouped.setdefault((flags.name, sc.group, reason), []).append(sc)
    out = []
    for (variant, label, reason), cases in grouped.items():
        first = cases[0]
        for sc in cases:
            same = (sc.target_schema, sc.source_schema, sc.clauses, sc.result_schema)
            assert same == (first.target_schema, first.source_schema, first.clauses, first.result_schema)
            assert sc.batchable or len(cases) == 1
        out.append(Group(flags_of[variant], label, tuple(cases), reason))
    return out


GROUPS = _groups()


def _param(g: Group) -> Any:
    marks = [pytest.mark.xfail(strict=True, reason=g.xfail)] if g.xfail else []
    suffix = "-xfail" if g.xfail else ""
    return pytest.param(g, id=f"{g.flags.name}: {g.label} ({len(g.cases)}){suffix}", marks=marks)


# --- running ----------------------------------------------------------------------------------------


def _conform(value: Any, dt: Any) -> Any:
    """A parsed JSON value read with type ``dt``, as Spark's JSON reader fills it (missing and
    unknown fields: NULL / ignored), in the shape ``Row.asDict(recursive=True)`` gives."""
    from pyspark.sql.types import ArrayType, MapType, StructType

    if value is None:
        return None
    if isinstance(dt, StructType):
        return {f.name: _conform(value.get(f.name), f.dataType) for f in dt.fields}
    if isinstance(dt, ArrayType):
        return [_conform(v, dt.elementType) for v in value]
    if isinstance(dt, MapType):
        return {k: _conform(v, dt.valueType) for k, v in value.items()}
    return value


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _renumber(rows: tuple[str, ...], key: int) -> list[str]:
    out = []
    for text in rows:
        row = json.loads(text)
        row["key"] = key
        out.append(json.dumps(row))
    return out


def _read_json(spark, rows: list[str], ddl: str):
    """Delta's ``readFromJSON``: the reader makes every column nullable, whatever the schema says."""
    from pyspark.sql.types import StructType

    reader = spark.read.schema(StructType.fromDDL(ddl)).option("mode", "FAILFAST")
    return reader.json(spark.sparkContext.parallelize(rows, 1))


def _version(path: str) -> int:
    return deltamerge.io.snapshot_for(path).version


@pytest.mark.parametrize("group", [_param(g) for g in GROUPS])
def test_struct_evolution_nullness(spark, tmp_path, spark_conf, group: Group) -> None:
    from pyspark.sql.types import StructType

    first = group.cases[0]
    target: list[str] = []
    source: list[str] = []
    expected: dict[str, list[str]] = {}
    result_type = StructType.fromDDL(first.result_schema)
    for i, sc in enumerate(group.cases, start=1):
        # Batched Delta tests get keys 1, 2, ...; a lone multi-clause test keeps its own keys.
        key = i if first.batchable else None
        target += list(sc.target) if key is None else _renumber(sc.target, key)
        source += list(sc.source) if key is None else _renumber(sc.source, key)
        rows = list(sc.result) if key is None else _renumber(sc.result, key)
        expected[sc.name] = [_canonical(_conform(json.loads(r), result_type)) for r in rows]

    path = str(tmp_path / "target")
    deltamerge.write(_read_json(spark, target, first.target_schema), path, mode="append")
    before = _version(path)
    _read_json(spark, source, first.source_schema).createOrReplaceTempView("source")
    statement = "\n".join(
        [f"MERGE INTO delta.`{path}` t", "USING source s", "ON t.key = s.key", *first.clauses]
    )
    spark_conf(group.flags.confs)
    try:
        spark_conf({AUTO_MERGE: "false"})
        with pytest.raises(Exception) as failure:
            deltamerge.sql(spark, statement)
        assert first.error_without_evolution in str(failure.value)
        assert _version(path) == before
        spark_conf({AUTO_MERGE: "true"})
        deltamerge.sql(spark, statement)
    finally:
        spark.catalog.dropTempView("source")

    out = deltamerge.read(spark, path)
    assert out.schema == result_type, out.schema.simpleString()
    got = Counter(_canonical(r.asDict(recursive=True)) for r in out.collect())
    want = Counter(row for rows in expected.values() for row in rows)
    if got != want:
        wrong = [name for name, rows in expected.items() if not Counter(rows) <= got]
        missing = sorted((want - got).elements())
        extra = sorted((got - want).elements())
        pytest.fail(f"Delta tests with wrong rows: {wrong}\nmissing: {missing}\nunexpected: {extra}")


def test_every_delta_test_is_ported() -> None:
    """The default variant covers all of the suite's tests (counted per family)."""
    counts = Counter(sc.name.split(" - ")[0] for sc in scenarios(DEFAULT))
    assert counts == {
        "top-level struct": 24 + 10,
        "nested struct": 56 + 11,
        "top-level array-of-struct": 16 + 4,
        "nested array-of-struct": 85 + 6,
        "top-level map-of-struct": 16 + 4,
        "nested map-of-struct": 85 + 6,
        "multiple clauses": 5,
    }
    ported = sum(len(g.cases) for g in GROUPS if g.flags is DEFAULT)
    assert ported == sum(counts.values())
