"""The executions of a MERGE that deltamerge chooses between, each forced by session settings, so
that tests can run one merge every way and compare: the single pass (merge/single_pass.py), DV
mode's one job with the matched rows broadcast or shuffled (merge/one_job.py; copy-on-write takes
the two jobs there), the two-job broadcast variant (merge/broadcast.py) and the Delta-shaped path
(merge/classic.py)."""

BROADCAST = "spark.deltamerge.merge.broadcastSourceMaxBytes"
SINGLE_PASS = "spark.deltamerge.merge.singlePassMaxRows"
ONE_JOB = "spark.deltamerge.merge.deletionVectors.oneJob"
MATCHED_MAX = "spark.deltamerge.merge.deletionVectors.broadcastMatchedMaxBytes"

VARIANTS: dict[str, dict[str, str]] = {
    "single-pass": {},
    "one-job": {SINGLE_PASS: "0"},
    "one-job-shuffled": {SINGLE_PASS: "0", MATCHED_MAX: "0"},
    "two-job": {SINGLE_PASS: "0", ONE_JOB: "false"},
    "delta-shaped": {BROADCAST: "0"},
}
