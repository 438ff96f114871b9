"""deltamerge: Delta Lake's MERGE INTO for PySpark, on a pure-Python Delta table layer.

No Delta jars: any PySpark 4.x session (classic or Spark Connect) can create, read, append to and
MERGE into Delta tables that Delta Lake and delta-rs read and write too.
"""

from deltamerge.catalog import register_table, unregister_table
from deltamerge.errors import DeltaMergeError
from deltamerge.io import read, write
from deltamerge.table import DeltaTable

__version__ = "0.1.0"

__all__ = ["DeltaMergeError", "DeltaTable", "__version__", "read", "register_table", "sql", "unregister_table", "write"]


def sql(spark, text: str):  # type: ignore[no-untyped-def]
    """Run a SQL statement: MERGE INTO on Delta tables here, anything else through ``spark.sql``."""
    from deltamerge.sql import run_sql

    return run_sql(spark, text)
