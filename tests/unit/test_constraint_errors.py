"""How a failed Spark write is read back as a constraint violation (no Spark session needed)."""

from __future__ import annotations

from pyspark.errors import AnalysisException
from pyspark.sql.types import IntegerType, StructField, StructType

from deltamerge.constraints import violation_from
from deltamerge.errors import InvariantViolationError

SCHEMA = StructType([StructField("id", IntegerType(), False)])


def test_a_row_that_failed_the_check_is_reported_as_the_violation() -> None:
    error = RuntimeError('Job aborted: <<DM_CONSTRAINT:0>>{"id":null}<<DM_CONSTRAINT_END>>')
    violation = violation_from(error, SCHEMA, {})
    assert isinstance(violation, InvariantViolationError)
    assert "DELTA_NOT_NULL_CONSTRAINT_VIOLATED" in str(violation)


def test_a_plan_that_failed_analysis_is_not_a_violation() -> None:
    # The analysis error prints the plan, and with it the check's message template.
    error = AnalysisException(
        message="cannot cast ... raise_error(concat(<<DM_CONSTRAINT:0>>, {}, <<DM_CONSTRAINT_END>>))"
    )
    assert violation_from(error, SCHEMA, {}) is None


def test_other_failures_are_not_violations() -> None:
    assert violation_from(RuntimeError("disk full"), SCHEMA, {}) is None
