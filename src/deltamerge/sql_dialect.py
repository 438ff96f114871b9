"""The SQL dialect deltamerge parses and writes users' SQL in: SQLGlot's Spark dialect with what it
gets wrong for Spark 4 put right (tests/spark/test_sql_dialect.py checks the round trip).

Pure Python; the installed PySpark's release is read from the package metadata.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, ClassVar, cast

import sqlglot
from sqlglot import exp, transforms
from sqlglot.dialects.dialect import groupconcat_sql
from sqlglot.dialects.spark import Spark
from sqlglot.errors import ErrorLevel, UnsupportedError
from sqlglot.generator import Generator
from sqlglot.tokens import TokenType

from deltamerge.errors import AnalysisError

# The dialect's generator class (SQLGlot has moved it between modules across versions).
_SparkGenerator: Any = Spark.Generator
_SparkParser: Any = Spark.Parser
_SparkTokenizer: Any = Spark.Tokenizer


def _instr(gen: Generator, e: exp.StrPosition) -> str:
    # Spark 4's instr(str, substr, pos, occurrence); SQLGlot's LOCATE drops the occurrence.
    if e.args.get("occurrence") is None:
        return cast(str, _SparkGenerator.TRANSFORMS[exp.StrPosition](gen, e))
    position = e.args.get("position") or exp.Literal.number(1)
    return gen.func("INSTR", e.this, e.args.get("substr"), position, e.args.get("occurrence"))


def _listagg(gen: Generator, e: exp.GroupConcat) -> str:
    # Spark's listagg(x) / string_agg(x) join with no separator; SQLGlot writes ',' in.
    return groupconcat_sql(gen, e, sep=None)


def _json_extract(gen: Generator, e: exp.JSONExtract) -> str:
    # Spark 4's semi-structured extraction v:a.b[0] (a VARIANT); SQLGlot's Spark writes
    # get_json_object, which takes a JSON string.
    if not e.args.get("variant_extract"):
        return cast(str, _SparkGenerator.TRANSFORMS[exp.JSONExtract](gen, e))
    path = ""
    for part in e.expression.expressions:
        if isinstance(part, exp.JSONPathRoot):
            continue
        if isinstance(part, exp.JSONPathSubscript) and isinstance(part.this, int):
            path += f"[{part.this}]"
        elif isinstance(part, exp.JSONPathKey) and isinstance(part.this, str):
            key = part.this
            if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
                path += f"{'.' if path else ''}{key}"
            else:
                path += "['" + key.replace("\\", "\\\\").replace("'", "\\'") + "']"
        else:
            gen.unsupported(f"The path part {part.sql()} of a VARIANT extraction")
    return f"{gen.sql(e, 'this')}:{path}"


def _by(name: str) -> Callable[[Generator, exp.Expression], str]:
    # max_by(x, y, n) / min_by(x, y, n) of Spark 4 keep their count; SQLGlot drops it.
    def sql(gen: Generator, e: exp.Expression) -> str:
        return gen.func(name, e.this, e.expression, e.args.get("count"))

    return sql


class ShiftRightUnsigned(exp.BitwiseRightShift):  # type: ignore[misc]
    """Spark's ``a >>> b`` (``shiftrightunsigned``), which SQLGlot does not know; written back as
    the operator, so that Spark groups it with its neighbours as it would have."""


#: Function names Spark also reads without parentheses when no column has the name (its
#: LiteralFunctionResolution): ``current_date``, ``user``... A column of that name comes first.
BARE_FUNCTIONS = frozenset(
    {"current_date", "current_timestamp", "current_time", "current_user", "user", "session_user"}
)
_BARE = "bare_function"


def bare_function_name(node: exp.Expr) -> str | None:
    """The name a function node was written as without parentheses (``current_date``), which a
    column of that name would win over; None for anything else."""
    name = node.meta.get(_BARE) if node.meta else None
    return name if isinstance(name, str) else None


def mark_bare(node: exp.Expr, name: str) -> None:
    """Mark ``node`` as standing for the bare function name ``name`` (see ``bare_function_name``)."""
    node.meta[_BARE] = name


def bare_function(name: str) -> exp.Expression:
    """The function a bare name (one of ``BARE_FUNCTIONS``) stands for when no column has it."""
    lower = name.lower()
    if lower in ("current_user", "user", "session_user"):
        return exp.Anonymous(this=lower, expressions=[])
    return cast(exp.Expression, sqlglot.parse_one(f"{lower}()", read=DIALECT))


def _marked_bare(cls: type[exp.Expression], name: str) -> Callable[[], exp.Expression]:
    def make() -> exp.Expression:
        node = cls()
        mark_bare(node, name)
        return node

    return make


def _niladic(name: str) -> Callable[[Generator, exp.Expression], str]:
    # Written as it was: bare (which a column of that name wins over, as in Spark) or with
    # parentheses (always the function).
    def sql(gen: Generator, e: exp.Expression) -> str:
        if any(v is not None for v in e.args.values()):
            return gen.function_fallback_sql(cast(exp.Func, e))
        return name if bare_function_name(e) else f"{name}()"

    return sql


class _Generator(_SparkGenerator):  # type: ignore[misc]
    PARSE_JSON_NAME = "PARSE_JSON"
    # Spark 4 has TIME (SQLGlot's Spark writes TIMESTAMP, as for Spark 3).
    TYPE_MAPPING: ClassVar[dict[Any, str]] = {
        **_SparkGenerator.TYPE_MAPPING,
        exp.DataType.Type.TIME: "TIME",
    }
    TRANSFORMS: ClassVar[dict[type[exp.Expression], Callable[..., str]]] = {
        k: v
        for k, v in {
            **_SparkGenerator.TRANSFORMS,
            exp.StrPosition: _instr,
            # Spark 4's shift operators, written back as operators: SQLGlot reads them at the level
            # of & and | (Spark binds shifts tighter), which its SHIFTRIGHT(a & b, 1) would fix.
            ShiftRightUnsigned: lambda gen, e: gen.binary(e, ">>>"),
            exp.BitwiseRightShift: lambda gen, e: gen.binary(e, ">>"),
            exp.BitwiseLeftShift: lambda gen, e: gen.binary(e, "<<"),
            exp.CurrentDate: _niladic("CURRENT_DATE"),
            exp.CurrentTimestamp: _niladic("CURRENT_TIMESTAMP"),
            exp.CurrentUser: _niladic("CURRENT_USER"),
            exp.SessionUser: _niladic("SESSION_USER"),
            exp.GroupConcat: _listagg,
            exp.ArgMax: _by("MAX_BY"),
            exp.ArgMin: _by("MIN_BY"),
            # percentile_cont / percentile_disc (p) WITHIN GROUP (ORDER BY x) are exact in Spark 4;
            # SQLGlot's Spark turns them into percentile_approx.
            exp.WithinGroup: None,
            # Spark 4 has QUALIFY; SQLGlot's Spark wraps the query in one more, whose SELECT *
            # carries the window's value out as an extra column (_w).
            exp.Select: transforms.preprocess(
                [
                    transforms.eliminate_distinct_on,
                    transforms.unnest_to_explode,
                    transforms.any_to_exists,
                ]
            ),
            exp.JSONExtract: _json_extract,
            # Spark's levenshtein(a, b, threshold): SQLGlot reads the third argument as a cost.
            exp.Levenshtein: lambda gen, e: gen.func(
                "LEVENSHTEIN", e.this, e.expression, e.args.get("ins_cost") or e.args.get("max_dist")
            ),
        }.items()
        if v is not None
    }

    def __init__(self, *args: object, **kwargs: object) -> None:
        # What SQLGlot cannot write for Spark it would drop with a warning (an argument, a clause),
        # silently changing the statement's meaning; refuse instead.
        kwargs.setdefault("unsupported_level", ErrorLevel.RAISE)
        super().__init__(*args, **kwargs)

    def generate(self, expression: exp.Expression, copy: bool = True) -> str:
        try:
            return cast(str, super().generate(expression, copy))
        except UnsupportedError as e:
            reason = str(e).rstrip(".")
            raise AnalysisError(
                f"deltamerge rewrites the statement's expressions before Spark runs them and cannot "
                f"write this one back unchanged: {reason}. Rewrite it with other Spark functions, or "
                "compute it in the source query.",
                error_class="UNSUPPORTED_EXPR_FOR_OPERATOR",
            ) from None

    def tochar_sql(self, expression: exp.ToChar) -> str:
        # to_char(x, format) formats numbers, dates and binaries in Spark 4; SQLGlot writes a cast.
        if expression.args.get("format") is None:
            return cast(str, super().tochar_sql(expression))
        return self.func("TO_CHAR", expression.this, expression.args.get("format"))

    def cast_sql(self, expression: exp.Cast, safe_prefix: str | None = None) -> str:
        # TIME '12:30' is a literal in Spark 4 even where CAST(... AS TIME) needs
        # spark.sql.timeType.enabled.
        literal = expression.this
        if (
            expression.to.is_type(exp.DataType.Type.TIME)
            and isinstance(literal, exp.Literal)
            and literal.is_string
            and not safe_prefix
        ):
            return f"TIME {self.sql(literal)}"
        return cast(str, super().cast_sql(expression, safe_prefix))

    def localtimestamp_sql(self, expression: exp.Localtimestamp) -> str:
        return self.func("LOCALTIMESTAMP", expression.this)

    def collate_sql(self, expression: exp.Collate) -> str:
        if isinstance(expression.expression, exp.Literal):
            return self.func("COLLATE", expression.this, expression.expression)
        return self.binary(expression, "COLLATE")


class _Tokenizer(_SparkTokenizer):  # type: ignore[misc]
    # Spark 4 reads a doubled quote inside a literal as one quote ('it''s' is "it's"); SQLGlot's
    # Spark reads two adjacent literals and concatenates them ("its"), silently.
    STRING_ESCAPES: ClassVar[list[str]] = ["\\", "'", '"']
    # Spark's raw strings (r'a\b') keep every character; a quote ends them.
    STRING_ESCAPES_ALLOWED_IN_RAW_STRINGS = False
    # ~~5 is a double bitwise NOT in Spark (Postgres's ~~ LIKE, ~* and ~~~ are no Spark operators).
    KEYWORDS: ClassVar[dict[str, Any]] = {
        k: v for k, v in _SparkTokenizer.KEYWORDS.items() if not k.startswith("~")
    }


class _Parser(_SparkParser):  # type: ignore[misc]
    def _parse_primary(self) -> exp.Expr | None:
        # Adjacent string literals ('a' 'b'; on Spark 4.0 also 'it''s') are one literal to Spark;
        # SQLGlot's CONCAT of them has no literal text (a table COMMENT read it as empty).
        node = super()._parse_primary()
        parts = node.expressions if isinstance(node, exp.Concat) else ()
        if parts and all(isinstance(p, exp.Literal) and p.is_string for p in parts):
            return exp.Literal.string("".join(p.this for p in parts))
        return cast("exp.Expr | None", node)

    # v:a.b[0] extracts from a VARIANT in Spark 4 (SQLGlot's Spark reads ``v AS :a``).
    COLON_IS_VARIANT_EXTRACT = True
    # current_date written without parentheses is a column when one has that name (Spark resolves
    # columns first): marked, so MERGE resolution can tell it from current_date().
    NO_PAREN_FUNCTIONS: ClassVar[dict[Any, Any]] = {
        token: _marked_bare(cls, token.name.lower()) for token, cls in _SparkParser.NO_PAREN_FUNCTIONS.items()
    }

    def _parse_term(self, parse_mod: bool = True) -> Any:
        # a >>> b: Spark's unsigned right shift, which binds like >> (looser than + and -). SQLGlot
        # reads ``a >>`` and fails on ``> b``. Three adjacent '>' tokens, not one token: a nested
        # type closes with them too (ARRAY<ARRAY<ARRAY<INT>>>).
        this = super()._parse_term(parse_mod=parse_mod)
        while this is not None and self._unsigned_shift_ahead():
            self._advance(3)
            right = super()._parse_term(parse_mod=parse_mod)
            this = self.expression(ShiftRightUnsigned(this=this, expression=right))
        return this

    def _parse_type(self, *args: Any, **kwargs: Any) -> Any:
        # X 'F0' (a space before the quote) is Spark's binary literal too, like DATE '...'.
        curr, nxt = self._curr, self._next
        if (
            curr is not None
            and nxt is not None
            and curr.token_type == TokenType.VAR
            and curr.text.upper() == "X"
            and nxt.token_type == TokenType.STRING
        ):
            self._advance(2)
            return self._parse_column_ops(self.expression(exp.HexString(this=nxt.text)))
        return super()._parse_type(*args, **kwargs)

    def _unsigned_shift_ahead(self) -> bool:
        tokens = self._tokens[self._index : self._index + 3]
        return (
            len(tokens) == 3
            and all(t.token_type == TokenType.GT for t in tokens)
            and tokens[0].end + 1 == tokens[1].start
            and tokens[1].end + 1 == tokens[2].start
        )

    def _parse_value(self, values: bool = True) -> exp.Tuple | None:
        # VALUES 1, 2 AS s(id): one row per bare value. SQLGlot's Spark reads ``2 AS s`` as the last
        # value, aliased, and the table's alias is lost.
        if self._curr is not None and self._curr.token_type != TokenType.L_PAREN:
            value = self._parse_assignment()
            return exp.Tuple(expressions=[value]) if value is not None else None
        return cast("exp.Tuple | None", super()._parse_value(values))

    def _parse_derived_table_values(self, *args: Any, **kwargs: Any) -> Any:
        # (VALUES (1, 'a') AS y(id, v)) s: SQLGlot keeps the alias inside the parentheses and fails
        # on the one after them. Spark names the parenthesised relation by the outer alias: a
        # subquery over the aliased VALUES.
        derived = (
            self._curr is not None
            and self._next is not None
            and (self._curr.token_type, self._next.token_type) == (TokenType.L_PAREN, TokenType.VALUES)
        )
        values = super()._parse_derived_table_values(*args, **kwargs)
        if values is None or not derived:
            return values
        outer = self._parse_table_alias() if values.args.get("alias") else None
        if outer is None:
            return values
        inner = exp.select("*").from_(values)
        return self.expression(exp.Subquery(this=inner, alias=outer))


class DeltamergeSpark(Spark):
    """SQLGlot's Spark dialect (written for Spark 3), with what it gets wrong for Spark 4 put right,
    each fix commented where it is made: the tokenizer (doubled quotes in literals), the parser
    (bare VALUES lists, ``v:a.b`` on variants) and the generator (QUALIFY, instr, listagg,
    max_by/min_by, percentile_cont/disc, to_char, levenshtein, TIME, parse_json,
    localtimestamp, collate). What the generator still cannot write back unchanged raises
    ``UNSUPPORTED_EXPR_FOR_OPERATOR``. tests/spark/test_sql_dialect.py checks the round trip."""

    Tokenizer = _Tokenizer
    Parser = _Parser
    Generator = _Generator


class _AdjacentLiteralsTokenizer(_Tokenizer):
    # Spark 4.0 reads 'it''s' as two adjacent literals, concatenated: "its" (doubled quotes escape
    # from Spark 4.1 on, SPARK-52545).
    STRING_ESCAPES: ClassVar[list[str]] = ["\\"]


class DeltamergeSpark40(DeltamergeSpark):
    """``DeltamergeSpark`` for Spark 4.0, which reads a doubled quote in a literal as the end of one
    literal and the start of the next (``'it''s'`` is ``its``)."""

    Tokenizer = _AdjacentLiteralsTokenizer


def _spark_version() -> tuple[int, int]:
    # The installed PySpark's (a classic session's JVM is the same release); read from the package
    # metadata: this module imports no pyspark.
    from importlib import metadata

    for name in ("pyspark", "pyspark-client", "pyspark-connect"):
        try:
            parts = re.findall(r"\d+", metadata.version(name))[:2]
        except metadata.PackageNotFoundError:
            continue
        if len(parts) == 2:
            return int(parts[0]), int(parts[1])
    return (99, 0)


#: The dialect every SQL text of deltamerge is parsed and written in: the installed Spark's.
DIALECT: type[DeltamergeSpark] = DeltamergeSpark if _spark_version() >= (4, 1) else DeltamergeSpark40
