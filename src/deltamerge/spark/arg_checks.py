"""delta-spark's Python argument checks (python/delta/tables.py), shared by the DML and MERGE APIs.

``argname`` names the argument in the message as delta-spark does: ``'condition'``, or with the
method for builder calls (``'condition' in whenMatchedUpdate``).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column

__all__ = ["check_condition_arg", "check_set_arg"]


def check_condition_arg(condition: Any, argname: str = "'condition'") -> None:
    """delta-spark's ``_condition_to_jcolumn`` type check: None, a SQL string or a Column."""
    if condition is not None and not isinstance(condition, (str, Column)):
        raise TypeError(
            f"{argname} must be a Spark SQL Column or a string (expression in SQL syntax), "
            f"found to be of type {type(condition)}"
        )


def check_set_arg(values: Any, argname: str = "'set'") -> dict[str, str | Column]:
    """delta-spark's ``_dict_to_jmap`` checks: a dict of column names to SQL strings or Columns."""
    if values is None:
        raise ValueError(f"{argname} cannot be None")
    if not isinstance(values, dict):
        raise TypeError(f"{argname} must be a dict, found to be {type(values)}")
    for col, expr in values.items():
        if not isinstance(col, str):
            raise TypeError(
                f"Keys of dict in {argname} must contain only strings with column names, "
                f"found '{col}' of type '{type(col)}"
            )
        if not isinstance(expr, (str, Column)):
            raise TypeError(
                f"Values of dict in {argname} must contain only Spark SQL Columns or strings "
                f"(expressions in SQL syntax) as values, found '{expr}' of type '{type(expr)}'"
            )
    return values
