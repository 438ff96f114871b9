"""The column clauses of ``ALTER TABLE`` (after the table name), parsed for ``deltamerge.alter_columns``.

* ``ADD COLUMN[S] [(] name type [NOT NULL] [COMMENT 'c'] [FIRST | AFTER x], ... [)]``, names may be
  nested paths (``s.inner``);
* ``RENAME COLUMN path TO name``;
* ``DROP COLUMN[S] [IF EXISTS] [(] path, ... [)]``;
* ``ALTER | CHANGE [COLUMN] path`` ``TYPE t`` | ``COMMENT 'c'`` | ``SET NOT NULL`` | ``DROP NOT NULL``
  | ``FIRST`` | ``AFTER x``, and Hive's ``CHANGE [COLUMN] name name type [COMMENT 'c'] [FIRST | AFTER x]``.

A regular-expression front like the other Delta statements: sqlglot parses only some of these forms.
"""

from __future__ import annotations

import re

from pyspark.sql import SparkSession
from pyspark.sql.types import DataType, StructField

from deltamerge import alter_columns
from deltamerge.errors import ParseError, UnsupportedOperationError
from deltamerge.identifiers import IDENT as _IDENT
from deltamerge.identifiers import QUALIFIED as _PATH
from deltamerge.identifiers import name_parts as _path
from deltamerge.identifiers import unquote as _unquote

__all__ = ["run_alter_columns"]

_STRING = r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\""
_POSITION = rf"FIRST|AFTER\s+(?:{_IDENT})"
_F = re.IGNORECASE | re.DOTALL

_ADD = re.compile(r"ADD\s+COLUMNS?\s+(?P<body>.+)", _F)
_RENAME = re.compile(rf"RENAME\s+COLUMN\s+(?P<col>{_PATH})\s+TO\s+(?P<new>{_IDENT})", _F)
_DROP = re.compile(r"DROP\s+COLUMNS?\s+(?P<ifexists>IF\s+EXISTS\s+)?(?P<body>.+)", _F)
_ALTER = re.compile(rf"(?P<verb>ALTER|CHANGE)\s+(?:COLUMN\s+)?(?P<col>{_PATH})\s+(?P<action>.+)", _F)
_SPEC = re.compile(
    rf"(?P<name>{_PATH})\s+(?P<type>.+?)(?P<notnull>\s+NOT\s+NULL)?(?:\s+COMMENT\s+(?P<comment>{_STRING}))?"
    rf"(?:\s+(?P<pos>{_POSITION}))?",
    _F,
)
_HIVE = re.compile(
    rf"(?P<new>{_IDENT})\s+(?P<type>.+?)(?:\s+COMMENT\s+(?P<comment>{_STRING}))?(?:\s+(?P<pos>{_POSITION}))?",
    _F,
)


def _position(text: str | None) -> str | None:
    if text is None:
        return None
    words = text.split(None, 1)
    return "FIRST" if len(words) == 1 else f"AFTER {_unquote(words[1])}"


def _split(body: str) -> list[str]:
    """``body`` (in optional parentheses) split at its top-level commas."""
    body = body.strip()
    if body.startswith("(") and body.endswith(")"):
        body = body[1:-1]
    parts, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(body):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"`":
            quote = ch
        elif ch in "(<":
            depth += 1
        elif ch in ")>":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(body[start:i])
            start = i + 1
    parts.append(body[start:])
    return [p.strip() for p in parts if p.strip()]


def _data_type(text: str) -> DataType:
    try:
        return DataType.fromDDL(text.strip())
    except Exception as e:
        reason = next((line.strip() for line in str(e).splitlines() if line.strip()), "")
        raise ParseError(f"Cannot parse the data type {text.strip()!r}: {reason}") from None


def _new_column(spec: str) -> alter_columns.NewColumn:
    m = _SPEC.fullmatch(spec)
    if m is None:
        raise ParseError(
            f"Cannot parse the column definition {spec!r}: expected `name type [COMMENT '...']`."
        )
    if re.search(r"\bDEFAULT\b", m.group("type"), re.IGNORECASE):
        raise UnsupportedOperationError(
            "Failed to execute ALTER TABLE ADD COLUMNS command because it assigned a column DEFAULT "
            "value, which is not supported for Delta tables: add the column, then ALTER TABLE ... ALTER "
            "COLUMN c SET DEFAULT <expr> (rows written before keep NULL).",
            error_class="WRONG_COLUMN_DEFAULTS_FOR_DELTA_ALTER_TABLE_ADD_COLUMN_NOT_SUPPORTED",
        )
    if re.search(r"\bGENERATED\b", m.group("type"), re.IGNORECASE):
        raise UnsupportedOperationError(
            "Operation not allowed: `ADD COLUMNS with a generated or identity column` is not supported for "
            "Delta tables; define such columns when the table is created.",
            error_class="DELTA_OPERATION_NOT_ALLOWED",
        )
    path = _path(m.group("name"))
    metadata = {"comment": _unquote(m.group("comment"))} if m.group("comment") is not None else {}
    field = StructField(path[-1], _data_type(m.group("type")), m.group("notnull") is None, metadata)
    return alter_columns.NewColumn(tuple(path[:-1]), field, _position(m.group("pos")))


def run_alter_columns(spark: SparkSession, path: str, rest: str) -> bool:
    """Run the column clause ``rest`` of an ALTER TABLE on the table at ``path``; False when
    ``rest`` is not one of the column clauses."""
    if (m := _ADD.fullmatch(rest)) is not None:
        alter_columns.add_columns(spark, path, [_new_column(s) for s in _split(m.group("body"))])
    elif (m := _RENAME.fullmatch(rest)) is not None:
        alter_columns.rename_column(spark, path, _path(m.group("col")), _unquote(m.group("new")))
    elif (m := _DROP.fullmatch(rest)) is not None:
        columns = [_path(c) for c in _split(m.group("body"))]
        alter_columns.drop_columns(spark, path, columns, if_exists=m.group("ifexists") is not None)
    elif (m := _ALTER.fullmatch(rest)) is not None:
        _alter_column(spark, path, _path(m.group("col")), m.group("action").strip(), m.group("verb"))
    else:
        return False
    return True


def _alter_column(spark: SparkSession, path: str, column: list[str], action: str, verb: str) -> None:
    words = action.upper().split()
    if words[:1] == ["TYPE"]:
        alter_columns.alter_column(spark, path, column, data_type=_data_type(action[4:]))
    elif words[:1] == ["COMMENT"]:
        alter_columns.alter_column(spark, path, column, comment=_unquote(action[7:]))
    elif (d := re.fullmatch(r"\s*SET\s+DEFAULT\s+(?P<expr>.+)", action, _F)) is not None:
        alter_columns.alter_column(spark, path, column, default=d.group("expr").strip())
    elif words == ["DROP", "DEFAULT"]:
        alter_columns.alter_column(spark, path, column, default="")
    elif words in (["DROP", "NOT", "NULL"], ["SET", "NOT", "NULL"]):
        alter_columns.alter_column(spark, path, column, nullable=words[0] == "DROP")
    elif re.fullmatch(_POSITION, action, _F):
        alter_columns.alter_column(spark, path, column, position=_position(action))
    elif verb.upper() == "CHANGE" and (h := _HIVE.fullmatch(action)) is not None:
        if _unquote(h.group("new")).lower() != column[-1].lower():
            raise UnsupportedOperationError(
                "Renaming a column is not supported in Hive-style CHANGE COLUMN; use ALTER TABLE ... "
                "RENAME COLUMN instead.",
                error_class="_LEGACY_ERROR_TEMP_1323",
            )
        comment = _unquote(h.group("comment")) if h.group("comment") is not None else None
        alter_columns.alter_column(
            spark,
            path,
            column,
            data_type=_data_type(h.group("type")),
            comment=comment,
            position=_position(h.group("pos")),
        )
    else:
        raise ParseError(
            f"Cannot parse ALTER COLUMN ... {action!r}: expected TYPE, COMMENT, SET NOT NULL, DROP NOT NULL, "
            "SET DEFAULT, DROP DEFAULT, FIRST or AFTER."
        )


# --- ALTER TABLE name RENAME TO / SET LOCATION (the name's catalog entry) ---------------------------

_RENAME_TABLE = re.compile(r"RENAME\s+TO\s+(?P<new>\S+)", re.IGNORECASE | re.DOTALL)
_SET_LOCATION = re.compile(
    r"SET\s+LOCATION\s+(?P<location>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")", re.IGNORECASE | re.DOTALL
)


def run_alter_name(spark: SparkSession, path: str, name: str | None, rest: str) -> bool:
    """``RENAME TO new`` and ``SET LOCATION 'path'`` of a registered name (Spark's catalog entry, as
    Delta's AlterTableSetLocationDeltaCommand checks it); False for any other clause."""
    from deltamerge import catalog
    from deltamerge.builders.creation import _register_name
    from deltamerge.errors import AnalysisError, TableAlreadyExistsError, TableNotFoundError
    from deltamerge.log import column_mapping
    from deltamerge.log.snapshot import DeltaLog

    rename, relocate = _RENAME_TABLE.fullmatch(rest), _SET_LOCATION.fullmatch(rest)
    if rename is None and relocate is None:
        return False
    if name is None:
        raise AnalysisError(
            "Cannot change the name or the location of a path based table.",
            error_class="DELTA_CANNOT_SET_LOCATION_ON_PATH_IDENTIFIER",
            sql_state="42613",
        )
    if rename is not None:
        new = _register_name(".".join(_path(rename.group("new"))))
        if catalog.path_for_name(new) is not None:
            raise TableAlreadyExistsError(
                f"Cannot rename `{name}` to `{new}`: a table or view of that name already exists.",
                error_class="TABLE_OR_VIEW_ALREADY_EXISTS",
                sql_state="42P07",
            )
        catalog.unregister_table(spark, name)
        catalog.register_table(spark, new, path)
        return True
    assert relocate is not None
    location = _unquote(relocate.group("location"))
    old, new_log = DeltaLog.for_table(path), DeltaLog.for_table(location)
    if not new_log.exists():
        raise TableNotFoundError(
            f"`{location}` is not a Delta table: SET LOCATION needs the path of an existing Delta table.",
            error_class="DELTA_MISSING_DELTA_TABLE",
            sql_state="42P01",
        )
    before, after = old.update().metadata, new_log.update().metadata
    bypass = str(spark.conf.get("spark.databricks.delta.alterLocation.bypassSchemaCheck", "false"))
    same = column_mapping.without_mapping_metadata(before.schema) == column_mapping.without_mapping_metadata(
        after.schema
    ) and [p.lower() for p in before.partition_columns] == [p.lower() for p in after.partition_columns]
    if bypass.strip().lower() != "true" and not same:
        raise AnalysisError(
            "The schema of the new Delta location is different than the current table schema.\n"
            f"original schema:\n{before.schema_string}\ndestination schema:\n{after.schema_string}\n\n"
            "If this is an intended change, you may turn this check off by running:\n"
            "%sql set spark.databricks.delta.alterLocation.bypassSchemaCheck = true",
            error_class="DELTA_SET_LOCATION_SCHEMA_MISMATCH",
            sql_state="42KD7",
        )
    catalog.register_table(spark, name, location)
    return True
