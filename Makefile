PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-full test-delta-ports test-fast test-oldest test-spark lint bench bench-small soak clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m deltamerge.demo

test: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider --durations=15 -n 2 --dist loadfile --no-loadscope-reorder tests

# Everything `make test` samples: every Delta port, every item of the sampled matrices, 150 generated
# differential examples, a randomly killed Spark writer in the crash test (about four times as long
# as `make test`), with Spark's code generation on (make test interprets: tests/conftest.py).
test-full: $(STAMP)
	DELTAMERGE_DELTA_PORTS=all DELTAMERGE_SAMPLED=all MERGE_PROPERTY_EXAMPLES=150 SEQUENCE_EXAMPLES=25 DELTAMERGE_CRASH_SPARK_CYCLES=1 \
		DELTAMERGE_TEST_CODEGEN=1 \
		$(BIN)/python -m pytest -q -p no:cacheprovider --durations=15 -n 2 --dist loadfile --no-loadscope-reorder tests

# Every item of the Delta suite ports (make test runs every 80th of the MERGE suites' and every third
# of delta-spark's Python suites'; see tests/conftest.py).
test-delta-ports: $(STAMP)
	DELTAMERGE_DELTA_PORTS=all $(BIN)/python -m pytest -q -p no:cacheprovider -n 2 --dist loadfile tests/spark/test_merge_*_delta.py tests/spark/test_*_py_delta.py

# The whole suite against the oldest releases pyproject.toml admits (constraints-oldest.txt: Spark
# 4.0, pyarrow 18, SQLGlot 30.24...), in a venv of its own.
test-oldest:
	test -x .venv-oldest/bin/python || $(PY) -m venv .venv-oldest
	.venv-oldest/bin/python -m pip install --quiet --upgrade pip
	.venv-oldest/bin/python -m pip install --quiet -e ".[dev]" -c constraints-oldest.txt
	.venv-oldest/bin/python -m pytest -q -p no:cacheprovider --durations=15 -n 2 --dist loadfile --no-loadscope-reorder tests

# The whole suite on another PySpark release in a venv of its own: `make test-spark SPARK=4.1.4`
# (.venv-spark-4.1.4). Releases between the oldest and the newest are checked this way.
test-spark:
	test -n "$(SPARK)" || (echo "usage: make test-spark SPARK=<pyspark version>" && exit 2)
	test -x .venv-spark-$(SPARK)/bin/python || $(PY) -m venv .venv-spark-$(SPARK)
	.venv-spark-$(SPARK)/bin/python -m pip install --quiet --upgrade pip
	.venv-spark-$(SPARK)/bin/python -m pip install --quiet -e ".[dev]" "pyspark[connect]==$(SPARK)"
	.venv-spark-$(SPARK)/bin/python -m pytest -q -p no:cacheprovider --durations=15 -n 2 --dist loadfile --no-loadscope-reorder tests

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/unit

lint: $(STAMP)
	$(BIN)/ruff check src tests
	$(BIN)/mypy src/deltamerge
	$(BIN)/lint-imports

# Long reliability run: more writer processes, minutes of concurrent MERGEs/appends/deletes, many
# kill cycles, thousands of generated statements (knobs: DELTAMERGE_SOAK_SECONDS, _SPARK_WRITERS,
# _LOG_WRITERS, _KILLS, _EXAMPLES; DELTAMERGE_SOAK_REPORT=<file> appends the run's numbers as JSON).
soak: $(STAMP)
	DELTAMERGE_SOAK=1 $(BIN)/python -m pytest -q -s -p no:cacheprovider --timeout=0 tests/reliability -m soak

bench: $(STAMP)
	$(BIN)/python -m bench.run --scale full

bench-small: $(STAMP)
	$(BIN)/python -m bench.run --scale small

clean:
	rm -rf $(VENV) .venv-oldest .pytest_cache build dist
