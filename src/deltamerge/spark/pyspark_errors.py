"""deltamerge's errors as the PySpark exception types delta-spark raises.

delta-spark's errors reach Python as PySpark's exceptions: a ``DeltaAnalysisException`` is a
``pyspark.errors.AnalysisException``, a ``DeltaIllegalArgumentException`` an
``IllegalArgumentException``, a ``DeltaUnsupportedOperationException`` an
``UnsupportedOperationException``, the commit conflicts ``PySparkException`` s (``delta.exceptions``).
Code written for delta-spark catches those. deltamerge's error classes are defined without
PySpark (the log layer uses them and imports no Spark); when the Spark side of deltamerge is
loaded, :func:`adopt` adds the matching PySpark type to each class's bases, so
``except AnalysisException`` catches deltamerge's analysis errors as it catches Delta's.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.errors import AnalysisException, IllegalArgumentException, ParseException, PySparkException
from pyspark.errors.exceptions.base import UnsupportedOperationException

from deltamerge import errors

#: deltamerge class -> the PySpark type delta-spark raises for it (subclasses inherit it).
_PYSPARK_TYPES: tuple[tuple[type[errors.DeltaMergeError], type[PySparkException]], ...] = (
    (errors.AnalysisError, AnalysisException),
    (errors.ParseError, ParseException),
    (errors.SchemaMismatchError, AnalysisException),
    (errors.TableNotFoundError, AnalysisException),
    (errors.TableAlreadyExistsError, AnalysisException),
    (errors.InvalidArgumentError, IllegalArgumentException),
    (errors.UnsupportedOperationError, UnsupportedOperationException),
    (errors.MultipleSourceRowMatchingTargetRowError, UnsupportedOperationException),
    (errors.ConcurrentModificationError, PySparkException),
)


def adopt() -> None:
    """Give each deltamerge error class its PySpark type as a further base (once; idempotent)."""
    for ours, theirs in _PYSPARK_TYPES:
        if not issubclass(ours, theirs):
            ours.__bases__ = (*ours.__bases__, theirs)


@contextmanager
def quiet_query_context() -> Iterator[None]:
    """PySpark logs an analysis error's query context at ERROR before raising it; inside this block
    it does not, for a probe whose failure deltamerge expects and handles (or re-raises as its own).
    PySpark's own logger objects are switched off: a plain ``logging.Logger`` registered under their
    names would break PySpark's later ``logger.exception(..., errorClass=...)`` calls."""
    from pyspark.logger import PySparkLogger

    loggers = [PySparkLogger.getLogger(n) for n in ("DataFrameQueryContextLogger", "SQLQueryContextLogger")]
    were = [lg.disabled for lg in loggers]
    for lg in loggers:
        lg.disabled = True
    try:
        yield
    finally:
        for lg, was in zip(loggers, were, strict=True):
            lg.disabled = was
