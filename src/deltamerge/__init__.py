"""deltamerge: Delta Lake's MERGE INTO for PySpark, on a pure-Python Delta table layer.

No Delta jars: any PySpark 4.x session (classic or Spark Connect) can create, read, append to and
MERGE into Delta tables that Delta Lake and delta-rs read and write too.

The public names are loaded lazily, so ``deltamerge.log`` and ``deltamerge.txn`` (pure Python) can
be imported without importing PySpark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from deltamerge.errors import DeltaMergeError

__version__ = "0.1.0"

__all__ = [
    "DeltaMergeError",
    "DeltaTable",
    "IdentityGenerator",
    "__version__",
    "configure",
    "read",
    "read_changes",
    "register_table",
    "sql",
    "unconfigure",
    "unregister_table",
    "write",
]

if TYPE_CHECKING:
    from deltamerge.catalog import register_table, unregister_table
    from deltamerge.identity import IdentityGenerator
    from deltamerge.io import read, write
    from deltamerge.table import DeltaTable

_LAZY = {
    "DeltaTable": ("deltamerge.table", "DeltaTable"),
    "IdentityGenerator": ("deltamerge.identity", "IdentityGenerator"),
    "read": ("deltamerge.io", "read"),
    "write": ("deltamerge.io", "write"),
    "register_table": ("deltamerge.catalog", "register_table"),
    "unregister_table": ("deltamerge.catalog", "unregister_table"),
    "read_changes": ("deltamerge.cdf_read", "read_changes"),
    "configure": ("deltamerge.configure", "configure"),
    "unconfigure": ("deltamerge.configure", "unconfigure"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'deltamerge' has no attribute {name!r}")


def sql(spark: Any, text: str, args: Any = None, **kwargs: Any) -> Any:
    """Run a SQL statement: MERGE INTO on Delta tables here, anything else through ``spark.sql``.

    ``args`` and ``kwargs`` work as in ``spark.sql``: ``args`` binds parameter markers (``:name``
    with a dict, ``?`` with a list) to literals; ``kwargs`` fills ``{name}`` fields, a DataFrame by
    a temporary view (dropped after the statement on a classic session; kept on Spark Connect, where
    the returned DataFrame is analysed lazily).
    """
    from deltamerge.sql_frontend import run_sql

    formatter = None
    if kwargs:
        from deltamerge.sql_params import TextFormatter

        formatter = TextFormatter(spark)
        text = formatter.format(text, **kwargs)
    try:
        if args:
            from deltamerge.sql_params import bind_parameters

            text = bind_parameters(text, args)
        return run_sql(spark, text)
    finally:
        from deltamerge.spark.session import is_connect

        if formatter is not None and not is_connect(spark):
            formatter.drop_views()
