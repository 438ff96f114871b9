"""The Spark adapter: scans, writes, types, sessions. Loading it makes deltamerge's errors
PySpark's exception types too (:mod:`deltamerge.spark.pyspark_errors`)."""

from deltamerge.spark.pyspark_errors import adopt

adopt()
