"""Store-assignment casts of MERGE values (Delta's ``UpdateExpressionsSupport.castIfNeeded``).

Everything here builds SQLGlot expression trees over the internal column names; nothing runs.

* Structs are cast **by field name**: a ``named_struct`` of the target's fields, each taken from
  the source field of the same name (case-insensitively) and cast recursively. A source field the
  target lacks is an error; a target field the source lacks is allowed only with schema evolution
  (NULL, or the target's current value for ``UPDATE *`` with evolution). A NULL source struct stays
  NULL (``merge.preserveNullSourceStructs``). Arrays of structs are cast element-wise with
  ``transform``, maps with ``transform_keys`` / ``transform_values``.
* Leaf casts follow ``spark.sql.storeAssignmentPolicy`` whatever ``spark.sql.ansi.enabled`` says:
  ANSI casts raise on overflow (``DELTA_CAST_OVERFLOW_IN_TABLE_WRITE``, naming the column) and on
  malformed input, through a ``raise_error`` guard around ``try_cast``; LEGACY is Spark's non-ANSI
  cast (integral overflow wraps, floating values saturate, bad input gives NULL), emulated where
  it differs from ``try_cast``; STRICT allows only up-casts and fails at analysis otherwise.
  ``updateAndMergeCastingFollowsAnsiEnabledFlag`` reverts to a plain ``CAST``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql.types import (
    ArrayType,
    DataType,
    MapType,
    NullType,
    StringType,
    StructType,
)
from sqlglot import exp

from deltamerge.config import SessionConf
from deltamerge.errors import AnalysisError
from deltamerge.merge.evolution import can_up_cast, catalog_string, contains_struct, same_type, sql_type
from deltamerge.merge.leaf_casts import (
    can_ansi_cast,
    contains_integral_or_decimal,
    legacy_leaf,
    overflow_message,
    raise_error,
    same_shape,
)
from deltamerge.merge.sql_trees import (
    Lambdas,
    field,
    if_,
    is_null,
    named_struct,
    plain_cast,
    try_cast,
    typed_null,
)
from deltamerge.predicates import is_deterministic


@dataclass(frozen=True)
class CastSettings:
    """The session settings that shape MERGE casts (read once per merge)."""

    policy: str = "ANSI"  # spark.sql.storeAssignmentPolicy: ANSI / LEGACY / STRICT
    follow_ansi_flag: bool = False  # updateAndMergeCastingFollowsAnsiEnabledFlag
    by_name: bool = True  # resolveMergeUpdateStructsByName.enabled
    preserve_null_structs: bool = True  # merge.preserveNullSourceStructs
    preserve_null_update_star: bool = True  # merge.preserveNullSourceStructs.updateStar (and the above)
    case_sensitive: bool = False  # spark.sql.caseSensitive

    @classmethod
    def from_conf(cls, get: Callable[[str], str | None], *, case_sensitive: bool) -> CastSettings:
        """Read the settings through a ``key -> value | None`` getter."""
        preserve = bool(SessionConf.PRESERVE_NULL_SOURCE_STRUCTS.get(get))
        update_star = SessionConf.PRESERVE_NULL_SOURCE_STRUCTS_UPDATE_STAR.get(get)
        return cls(
            policy=(get("spark.sql.storeAssignmentPolicy") or "ANSI").strip().upper(),
            follow_ansi_flag=bool(SessionConf.CASTING_FOLLOWS_ANSI.get(get)),
            by_name=bool(SessionConf.STRUCTS_BY_NAME.get(get)),
            preserve_null_structs=preserve,
            preserve_null_update_star=preserve and update_star is not False,
            case_sensitive=case_sensitive,
        )


# --- the caster -----------------------------------------------------------------------------------------


def _has_extra_fields(src: StructType, dst: StructType) -> bool:
    """``hasExtraStructFieldsToPreserveValue``: target-only struct fields at any struct depth."""
    if len(dst.fields) > len(src.fields):
        return True
    by_name = {f.name.lower(): f for f in src.fields}
    for f in dst.fields:
        s = by_name.get(f.name.lower())
        if s is None:
            return True
        if (
            isinstance(s.dataType, StructType)
            and isinstance(f.dataType, StructType)
            and _has_extra_fields(s.dataType, f.dataType)
        ):
            return True
    return False


_ARRAY_FUNCS = {"array_union", "arrayintersect", "arrayexcept", "arrayremove", "arraydistinct"}


def _array_func(node: exp.Expression) -> str | None:
    name = node.name.lower() if isinstance(node, exp.Anonymous) else type(node).__name__.lower()
    return name if name in _ARRAY_FUNCS else None


class Caster:
    """Builds cast trees for one MERGE (one set of settings, one evolution flag)."""

    def __init__(
        self, settings: CastSettings, *, allow_missing: bool, display: Callable[[exp.Expression], str]
    ):
        self.s = settings
        self.allow_missing = allow_missing  # schema evolution: target struct fields may be missing
        self.display = display  # internal-name tree -> the user's SQL (error messages)
        self.lambdas = Lambdas()

    # castIfNeeded ------------------------------------------------------------------------------------

    def cast_if_needed(
        self,
        node: exp.Expression,
        src: DataType,
        dst: DataType,
        column: str,
        original: tuple[exp.Expression, DataType] | None = None,
    ) -> exp.Expression:
        """``node`` (of type ``src``) as a value of ``dst``; ``original`` = the target's current value
        (``UPDATE *`` with evolution keeps target-only struct fields)."""
        if isinstance(node, exp.Null):
            return typed_null(dst)
        if (
            isinstance(src, ArrayType)
            and isinstance(dst, ArrayType)
            and isinstance(src.elementType, StructType)
            and isinstance(dst.elementType, StructType)
            and not (
                same_type(src.elementType, dst.elementType, case_sensitive=self.s.case_sensitive)
                and src.containsNull == dst.containsNull
            )
        ):
            return self._array_of_structs(node, src, dst, column)
        if isinstance(src, MapType) and isinstance(dst, MapType) and self._map_needs_rebuild(src, dst):
            out = node.copy()
            if src.keyType != dst.keyType:
                out = self._transform(
                    "transform_keys",
                    out,
                    lambda k, v: self.cast_if_needed(k, src.keyType, dst.keyType, column),
                )
            if src.valueType != dst.valueType:
                out = self._transform(
                    "transform_values",
                    out,
                    lambda k, v: self.cast_if_needed(v, src.valueType, dst.valueType, column),
                )
            return out
        if (
            isinstance(src, StructType)
            and isinstance(dst, StructType)
            and self.s.by_name
            and not same_type(src, dst, case_sensitive=False)
        ):
            return self._struct_by_name(node, src, dst, column, original)
        if not same_type(src, dst, case_sensitive=True):
            return self.policy_cast(node, src, dst, column)
        return node

    def _map_needs_rebuild(self, src: MapType, dst: MapType) -> bool:
        shape_ok = same_shape(src, dst)
        nested = (
            self.s.by_name
            and contains_struct(src)
            and contains_struct(dst)
            and not same_type(src, dst, case_sensitive=False)
        )
        return not shape_ok or nested

    def _transform(
        self, fn: str, node: exp.Expression, body: Callable[..., exp.Expression]
    ) -> exp.Expression:
        names = [self.lambdas.fresh(), self.lambdas.fresh()]
        lam = exp.Lambda(
            this=body(*[exp.column(n) for n in names]), expressions=[exp.to_identifier(n) for n in names]
        )
        return exp.Anonymous(this=fn, expressions=[node, lam])

    def _array_of_structs(
        self, node: exp.Expression, src: ArrayType, dst: ArrayType, column: str
    ) -> exp.Expression:
        func = _array_func(node)
        args = list(node.iter_expressions())
        if func is not None and args:
            out = node.copy()
            new_args = list(out.iter_expressions())
            for i, arg in enumerate(new_args):
                if func == "arrayremove" and i == 1:
                    arg.replace(self.cast_if_needed(args[i], src.elementType, dst.elementType, column))
                else:
                    arg.replace(self.cast_if_needed(args[i], src, dst, column))
            return out
        elem = self.lambdas.fresh()
        body = self.cast_if_needed(exp.column(elem), src.elementType, dst.elementType, column)
        lam = exp.Lambda(this=body, expressions=[exp.to_identifier(elem)])
        return exp.Anonymous(this="transform", expressions=[node.copy(), lam])

    def _struct_by_name(
        self,
        node: exp.Expression,
        src: StructType,
        dst: StructType,
        column: str,
        original: tuple[exp.Expression, DataType] | None,
    ) -> exp.Expression:
        dst_names = {f.name.lower() for f in dst.fields}
        if any(f.name.lower() not in dst_names for f in src.fields) or (
            len(src.fields) != len(dst.fields) and not self.allow_missing
        ):
            raise AnalysisError(
                f"Cannot cast {catalog_string(src)} to {catalog_string(dst)}. All nested columns must match.",
                error_class="DELTA_UPDATE_SCHEMA_MISMATCH_EXPRESSION",
                sql_state="42846",
            )
        originals: dict[str, tuple[exp.Expression, DataType]] = {}
        if original is not None and self.s.preserve_null_update_star and isinstance(original[1], StructType):
            by_name = {f.name.lower(): f for f in original[1].fields}
            for f in dst.fields:
                o = by_name.get(f.name.lower())
                if o is not None:
                    originals[f.name] = (field(original[0], o.name), o.dataType)
        src_by_name = {f.name.lower(): f for f in src.fields}
        pairs: list[tuple[str, exp.Expression]] = []
        for f in dst.fields:
            target_child = originals.get(f.name)
            s = src_by_name.get(f.name.lower())
            if s is not None:
                value, vtype = field(node, s.name), s.dataType
            elif target_child is not None:
                value, vtype = target_child
            else:
                value, vtype = exp.Null(), NullType()
            pairs.append((f.name, self.cast_if_needed(value, vtype, f.dataType, f.name, target_child)))
        rebuilt = named_struct(pairs)
        if not self.s.preserve_null_structs:
            return rebuilt
        cond = is_null(node)
        if original is not None and originals and _has_extra_fields(src, dst):
            cond = exp.And(this=cond, expression=is_null(original[0]))
        return if_(cond, typed_null(dst), rebuilt)

    # store-assignment casts ---------------------------------------------------------------------------

    def policy_cast(self, node: exp.Expression, src: DataType, dst: DataType, column: str) -> exp.Expression:
        """One cast under ``spark.sql.storeAssignmentPolicy`` (no by-name struct handling)."""
        if isinstance(src, NullType) or self.s.follow_ansi_flag:
            return plain_cast(node, dst)
        if can_up_cast(src, dst):
            return plain_cast(node, dst)
        if self.s.policy == "STRICT":
            shown = self.display(node)
            raise AnalysisError(
                f'Cannot up cast {shown} from "{sql_type(src)}" to "{sql_type(dst)}".\n'
                "The type path of the target object is:\n\n"
                "You can either add an explicit cast to the input data or choose a higher precision type "
                "of the field in the target object",
                error_class="CANNOT_UP_CAST_DATATYPE",
                sql_state="42846",
            )
        if self.s.policy == "LEGACY":
            return self._leafwise(node, src, dst, lambda v, s, d: legacy_leaf(v, s, d))
        if not can_ansi_cast(src, dst):
            raise AnalysisError(
                f'Cannot resolve "CAST({self.display(node)} AS {sql_type(dst)})" due to data type mismatch: '
                f'cannot cast "{sql_type(src)}" to "{sql_type(dst)}".',
                error_class="DATATYPE_MISMATCH.CAST_WITHOUT_SUGGESTION",
                sql_state="42K09",
            )
        return self._leafwise(node, src, dst, lambda v, s, d: self._ansi_leaf(v, s, d, src, dst, column))

    def _leafwise(
        self,
        node: exp.Expression,
        src: DataType,
        dst: DataType,
        leaf: Callable[[exp.Expression, DataType, DataType], exp.Expression],
    ) -> exp.Expression:
        """Apply ``leaf`` to every atomic position of a (positional) complex cast."""
        if same_type(src, dst, case_sensitive=True) or can_up_cast(src, dst) or isinstance(src, NullType):
            return plain_cast(node, dst) if not same_type(src, dst, case_sensitive=True) else node
        if isinstance(src, ArrayType) and isinstance(dst, ArrayType):
            elem = self.lambdas.fresh()
            body = self._leafwise(exp.column(elem), src.elementType, dst.elementType, leaf)
            lam = exp.Lambda(this=body, expressions=[exp.to_identifier(elem)])
            return exp.Anonymous(this="transform", expressions=[node.copy(), lam])
        if isinstance(src, MapType) and isinstance(dst, MapType):
            out = node.copy()
            if not same_type(src.keyType, dst.keyType, case_sensitive=True):
                out = self._transform(
                    "transform_keys", out, lambda k, v: self._leafwise(k, src.keyType, dst.keyType, leaf)
                )
            if not same_type(src.valueType, dst.valueType, case_sensitive=True):
                out = self._transform(
                    "transform_values",
                    out,
                    lambda k, v: self._leafwise(v, src.valueType, dst.valueType, leaf),
                )
            return out
        if isinstance(src, StructType) and isinstance(dst, StructType) and len(src.fields) == len(dst.fields):
            pairs = [
                (d.name, self._leafwise(field(node, s.name), s.dataType, d.dataType, leaf))
                for s, d in zip(src.fields, dst.fields, strict=False)
            ]
            return if_(is_null(node), typed_null(dst), named_struct(pairs))
        return leaf(node, src, dst)

    def _ansi_leaf(
        self,
        node: exp.Expression,
        src: DataType,
        dst: DataType,
        top_src: DataType,
        top_dst: DataType,
        column: str,
    ) -> exp.Expression:
        def message(v: exp.Expression) -> list[exp.Expression | str]:
            if isinstance(src, StringType):
                return [
                    "[CAST_INVALID_INPUT] The value '",
                    v.copy(),
                    f'\' of the type "STRING" cannot be cast to "{sql_type(dst)}" because it is '
                    "malformed. Correct the value as per the syntax, or change its target type. "
                    "Use `try_cast` to tolerate malformed input and return NULL instead.",
                ]
            if contains_integral_or_decimal(top_dst):
                return ["[DELTA_CAST_OVERFLOW_IN_TABLE_WRITE] " + overflow_message(top_src, top_dst, column)]
            return [
                "[CAST_OVERFLOW] The value ",
                plain_cast(v, StringType()),
                f' of the type "{sql_type(src)}" cannot be cast to "{sql_type(dst)}" due to an overflow. Use '
                "`try_cast` to tolerate overflow and return NULL instead.",
            ]

        def guard(v: exp.Expression) -> exp.Expression:
            failed = exp.And(this=exp.Not(this=is_null(v)), expression=is_null(try_cast(v, dst)))
            return exp.Case(ifs=[exp.If(this=failed, true=raise_error(message(v)))], default=try_cast(v, dst))

        if is_deterministic(node):
            return guard(node)
        # Evaluate a non-deterministic value once: bind it as a lambda variable.
        var = self.lambdas.fresh()
        lam = exp.Lambda(this=guard(exp.column(var)), expressions=[exp.to_identifier(var)])
        bound = exp.Anonymous(this="transform", expressions=[exp.Array(expressions=[node.copy()]), lam])
        return exp.Anonymous(this="element_at", expressions=[bound, exp.Literal.number(1)])
