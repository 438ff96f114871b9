"""The executions of a MERGE that deltamerge chooses between, each forced by session settings, so
that tests can run one merge every way and compare: the default choice (DV mode: an upsert whose
clauses write alike without a join, merge/uniform_upsert.py, else the one job,
broadcasting every candidate row when they are few; copy-on-write: as "single-pass"), the single pass
(merge/single_pass.py; also when every candidate file is guessed to be touched), DV mode's one job
with the matched rows broadcast or shuffled (merge/one_job.py; copy-on-write takes the two jobs
there), the two-job broadcast variant (merge/broadcast.py; under the guess copy-on-write's job 2
over every candidate without job 1, merge/full_rewrite.py) and the Delta-shaped path
(merge/classic.py)."""

BROADCAST = "spark.deltamerge.merge.broadcastSourceMaxBytes"
SINGLE_PASS = "spark.deltamerge.merge.singlePassMaxRows"
ONE_JOB = "spark.deltamerge.merge.deletionVectors.oneJob"
MATCHED_MAX = "spark.deltamerge.merge.deletionVectors.broadcastMatchedMaxBytes"
EXPECTED = "spark.deltamerge.merge.singlePassExpectedMatches"
CANDIDATES = "spark.deltamerge.merge.deletionVectors.broadcastCandidatesMaxRows"
UNIFORM = "spark.deltamerge.merge.uniformUpsert"

VARIANTS: dict[str, dict[str, str]] = {
    # DV mode's upsert whose UPDATE and INSERT write alike (merge/uniform_upsert.py) runs first.
    "default": {},
    "single-pass": {ONE_JOB: "false", UNIFORM: "false"},
    # Copy-on-write's single pass beyond its row limit whenever a candidate may match at all (a
    # guess that is often wrong on small data: the discarded write and the two jobs then run).
    "guessed-single-pass": {SINGLE_PASS: "1", EXPECTED: "1e-9", CANDIDATES: "0", UNIFORM: "false"},
    "one-job": {SINGLE_PASS: "0", CANDIDATES: "0", UNIFORM: "false"},
    "one-job-shuffled": {SINGLE_PASS: "0", MATCHED_MAX: "0", CANDIDATES: "0", UNIFORM: "false"},
    # Job 2 after job 1 (no guess: copy-on-write would run job 2 over every candidate without job 1,
    # merge/full_rewrite.py, which "guessed-single-pass" takes with NOT MATCHED clauses).
    "two-job": {SINGLE_PASS: "0", ONE_JOB: "false", UNIFORM: "false", EXPECTED: "0"},
    # No broadcast variant, and no guess that every candidate is touched (which would skip job 1).
    "delta-shaped": {BROADCAST: "0", EXPECTED: "0"},
}


# Variants every same-result comparison keeps: the default execution and the reference.
_ALWAYS = ("default", "delta-shaped")


def compared(variants: dict[str, dict[str, str]], keep: int = 1) -> dict[str, dict[str, str]]:
    """The variants a same-result test runs: all of them with DELTAMERGE_SAMPLED=all (`make
    test-full`); in `make test` the default execution, the Delta-shaped reference and ``keep``
    others, picked by a hash of the running test's id (fixed per test item, different across items)."""
    import os
    import zlib

    if os.environ.get("DELTAMERGE_SAMPLED", "").lower() in ("all", "1"):  # as conftest's stride
        return dict(variants)
    test_id = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" ", 1)[0]
    others = sorted(
        (k for k in variants if k not in _ALWAYS), key=lambda k: zlib.crc32(f"{test_id}:{k}".encode())
    )
    chosen = set(others[:keep]) | {k for k in _ALWAYS if k in variants}
    return {k: v for k, v in variants.items() if k in chosen}
