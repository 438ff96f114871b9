"""The ``deltamerge`` command line (typer + rich).

Subcommands: ``demo``, ``merge``, ``explain``, ``history``, ``describe``, ``changes``, ``vacuum``,
``optimize``, ``reorg``, ``drop-feature``, ``generate``. ``history``, ``describe`` and ``generate`` read the
transaction log only and start no Spark; the others reuse the active SparkSession when there is
one (``SparkSession.getActiveSession()``), else start a local one (or connect to
``--remote sc://host:port`` / ``$SPARK_REMOTE``).

Exit codes: 0 success; 1 the operation failed (the Delta or Spark error class is on stderr, as
``error: [DELTA_...] message``); 2 usage errors and paths that are not Delta tables.
"""

from __future__ import annotations

from deltamerge.cli.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, app
from deltamerge.cli.log_cmds import describe, generate, history
from deltamerge.cli.merge_cmds import _CLAUSE_HELP, _EXTRA, explain, merge
from deltamerge.cli.spark_cmds import changes, demo, drop_feature, optimize, reorg, vacuum

__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "app"]

# Registered here, in the order ``--help`` lists them.
app.command()(demo)
app.command(context_settings=_EXTRA, epilog=_CLAUSE_HELP)(merge)
app.command(context_settings=_EXTRA, epilog=_CLAUSE_HELP)(explain)
app.command()(history)
app.command()(describe)
app.command()(changes)
app.command()(vacuum)
app.command()(optimize)
app.command()(reorg)
app.command("drop-feature")(drop_feature)
app.command()(generate)
