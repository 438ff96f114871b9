"""Table names: a name given through deltamerge maps to a table path and to a Spark temp view.

``register_table(spark, "target", path)`` makes ``DeltaTable.forName(spark, "target")``, SQL
``MERGE INTO target`` and plain ``spark.sql("SELECT ... FROM target")`` all work. The temp view is
re-pointed at the newest snapshot after every deltamerge commit to the table, and before every
``deltamerge.sql`` statement that names it, so SELECTs never see a stale version.
"""

from __future__ import annotations

import re
import threading

from pyspark.sql import SparkSession

from deltamerge.errors import InvalidArgumentError
from deltamerge.log.paths import table_root
from deltamerge.spark.types import quote_name

_LOCK = threading.Lock()
_NAMES: dict[str, str] = {}  # lower-case name -> absolute table path
_VIEW_VERSIONS: dict[str, int] = {}  # lower-case name -> version the view shows
_SPELLED: dict[str, str] = {}  # lower-case name -> the name as registered (its temp view's name)
_MERGED_VIEWS: dict[str, str] = {}  # temp views a MERGE targeted -> absolute table path


_PART = re.compile(r"`(?:[^`]|``)+`|[^.`]+")


def _unquote(part: str) -> str:
    return part[1:-1].replace("``", "`") if part.startswith("`") and part.endswith("`") else part


def name_parts(name: str) -> list[str]:
    """The unquoted parts of a dotted table name (``db.`my table``` -> ``["db", "my table"]``)."""
    return [_unquote(p.strip()) for p in _PART.findall(name)]


def _without_session_catalog(name: str) -> list[str]:
    """The parts of ``name`` as written, without a leading ``spark_catalog.default`` / ``default``."""
    parts = [p.strip() for p in _PART.findall(name)]
    if len(parts) == 3 and _unquote(parts[0]).lower() == "spark_catalog":
        parts = parts[1:]
    if len(parts) == 2 and _unquote(parts[0]).lower() == "default":
        parts = parts[1:]
    return parts


def unqualified(name: str) -> str:
    """A table name without the ``spark_catalog`` / ``default`` qualifiers it may carry, unquoted."""
    return ".".join(_unquote(p) for p in _without_session_catalog(name))


def session_name(name: str, alternative: str) -> str:
    """The one part ``name`` names in the session catalog, as written (``people`` for
    ``default.people``, ```my table``` quoted); a name with another database is refused
    (deltamerge has no metastore: its names are Spark temp views, which have one part), naming
    ``alternative``."""
    parts = _without_session_catalog(name)
    if len(parts) != 1 or not _unquote(parts[0]).strip():
        raise InvalidArgumentError(
            f"Cannot name a table {name!r}: deltamerge table names are session names without a "
            f"database (it has no metastore). Use an unqualified name, or {alternative}.",
            error_class="REQUIRES_SINGLE_PART_NAMESPACE",
        )
    return parts[0]


def _key(name: str) -> str:
    # Names compare unquoted, case-insensitively, without the session catalog's qualifiers:
    # ``people``, ``DEFAULT.people`` and ```people``` are one name; ```my t``` and ``my t`` too.
    return unqualified(name).lower()


def register_table(spark: SparkSession, name: str, path: str) -> None:
    """Give the Delta table at ``path`` a name usable in deltamerge and in ``spark.sql`` (a session
    name: ``people`` or ``default.people``; REQUIRES_SINGLE_PART_NAMESPACE for another database)."""
    name = session_name(name, "DeltaTable.forPath(spark, path)")
    key = _key(name)
    with _LOCK:
        root = table_root(path)
        if _NAMES.get(key) != root:  # a name moved to another table: its view is stale
            _VIEW_VERSIONS.pop(key, None)
        _NAMES[key] = root
        _SPELLED[key] = name
    refresh_view(spark, name)


def unregister_table(spark: SparkSession, name: str) -> None:
    """Forget a name (and drop its temp view)."""
    key = _key(name)
    with _LOCK:
        _NAMES.pop(key, None)
        _VIEW_VERSIONS.pop(key, None)
        _SPELLED.pop(key, None)
    spark.catalog.dropTempView(unqualified(name))  # the view's own name, not parsed


def has_names() -> bool:
    """Whether any table name is registered."""
    return bool(_NAMES)


def path_for_name(name: str) -> str | None:
    """The table path registered under ``name`` (None when unknown); ``default.people``,
    ``spark_catalog.default.people`` and ```people``` name the table registered as ``people``."""
    return _NAMES.get(_key(name))


def refresh_view(spark: SparkSession, name: str) -> None:
    """Point the temp view of the registered ``name`` at the newest snapshot if it is behind."""
    from deltamerge.io import read_snapshot, snapshot_for

    key = _key(name)
    path = _NAMES.get(key)
    if path is None:
        return
    # Quoted: Spark parses a temp view's name, and ``my t`` or ``2024_sales`` is not an identifier.
    view = quote_name(unqualified(_SPELLED.get(key, name)))
    snap = snapshot_for(path)
    if _VIEW_VERSIONS.get(key) == snap.version and spark.catalog.tableExists(view):
        return
    read_snapshot(spark, snap).createOrReplaceTempView(view)
    _VIEW_VERSIONS[key] = snap.version


def track_view(name: str, path: str) -> None:
    """Remember that the user's temp view ``name`` is a full scan of the table at ``path`` (it was a
    MERGE target), so that commits to the table re-point it like a registered name's view."""
    with _LOCK:
        _MERGED_VIEWS[name.lower()] = table_root(path)


def refresh_views(spark: SparkSession, path: str) -> None:
    """Refresh every view of the table at ``path`` (after a commit to it)."""
    target = table_root(path)
    for name, p in list(_NAMES.items()):
        if p == target:
            refresh_view(spark, name)
    for name, p in list(_MERGED_VIEWS.items()):
        if p == target:
            from deltamerge import views

            try:  # only while the view still is a full scan of this table (the user may replace it)
                still = views.view_target_path(spark, name, check_columns=False) == target
            except Exception:
                still = False
            if still:
                views.refresh_after_write(spark, name, target)
            else:
                with _LOCK:
                    _MERGED_VIEWS.pop(name, None)
