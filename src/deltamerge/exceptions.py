"""delta-spark's ``delta.exceptions`` names for deltamerge's commit conflicts, so that code written
for delta-spark (``except ConcurrentAppendException: retry``) only changes its import.

Each name is deltamerge's own class (catching it catches what deltamerge raises);
``ConcurrentWriteException`` names the common base of the conflicts. With Spark loaded they are
``pyspark.errors.PySparkException`` s, as delta-spark's are.
"""

from __future__ import annotations

import deltamerge.spark  # noqa: F401  (makes the classes PySpark exceptions too)
from deltamerge.errors import ConcurrentAppendError as ConcurrentAppendException
from deltamerge.errors import ConcurrentDeleteDeleteError as ConcurrentDeleteDeleteException
from deltamerge.errors import ConcurrentDeleteReadError as ConcurrentDeleteReadException
from deltamerge.errors import ConcurrentModificationError as ConcurrentWriteException
from deltamerge.errors import ConcurrentModificationError as DeltaConcurrentModificationException
from deltamerge.errors import ConcurrentTransactionError as ConcurrentTransactionException
from deltamerge.errors import MetadataChangedError as MetadataChangedException
from deltamerge.errors import ProtocolChangedError as ProtocolChangedException

__all__ = [
    "ConcurrentAppendException",
    "ConcurrentDeleteDeleteException",
    "ConcurrentDeleteReadException",
    "ConcurrentTransactionException",
    "ConcurrentWriteException",
    "DeltaConcurrentModificationException",
    "MetadataChangedException",
    "ProtocolChangedException",
]
