"""Spark analysis errors of queries deltamerge builds, told in the user's column names.

A MERGE (and the UPDATE / DELETE built on it) runs its queries over positional internal names
(``__t0`` for the target's first column, ``__s0`` for the source's): user names may repeat or hold
any character. When Spark refuses a user's expression (``t.v = s.v`` on VARIANT columns, an
array added to a number), its message would show ``(__t1 = __s1)``. This module rewrites it with
the names the user wrote.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from pyspark.errors import AnalysisException as SparkAnalysisException

from deltamerge.errors import AnalysisError, DeltaMergeError

_INTERNAL = re.compile(r"`?\b__([ts])(\d+)\b`?")
# Spark appends the SQL state, a position and the analysed plan (over internal names) to the message.
_TAIL = re.compile(r"\s*(SQLSTATE: \w+)?;?\s*(line \d+ pos \d+)?;?\s*$")


class UserExpressionError(AnalysisError, SparkAnalysisException):
    """Spark could not analyse an expression of the statement (types, functions, ordering).

    Also a ``pyspark.errors.AnalysisException``, as Spark's own error would have been, so code that
    catches Spark's analysis errors catches this one too.
    """


def in_user_names(error: BaseException, name_of: Callable[[str, int], str]) -> UserExpressionError | None:
    """``error`` as a :class:`UserExpressionError` whose message names columns as the user does, or
    None when it is not a Spark analysis error over internal names.

    ``name_of(side, i)`` gives the user's name of internal column ``__<side><i>`` (side ``t``/``s``).
    """
    if not isinstance(error, SparkAnalysisException) or isinstance(error, DeltaMergeError):
        return None
    try:
        condition = error.getCondition()
        sql_state = error.getSqlState()
    except Exception:  # a Connect error whose details are gone, a JVM that went away
        condition, sql_state = None, None
    text = _message_text(error, condition)
    if not _INTERNAL.search(text):
        return None
    text = _INTERNAL.sub(lambda m: name_of(m.group(1), int(m.group(2))), text)
    return UserExpressionError(
        f"{text} (in an expression of the MERGE, UPDATE or DELETE statement; fix the expression's types "
        "or functions)",
        error_class=condition or "DELTA_ANALYSIS_ERROR",
        sql_state=sql_state,
    )


def _message_text(error: BaseException, condition: str | None) -> str:
    """The first line of Spark's message, without its ``[CLASS]`` prefix and its SQL state tail."""
    first = str(error).strip().splitlines()[0] if str(error).strip() else ""
    if condition and first.startswith(f"[{condition}]"):
        first = first[len(condition) + 2 :].strip()
    return _TAIL.sub("", first)
