"""_delta_log file names."""

from __future__ import annotations

import pytest

from deltamerge.log import filenames as fn


def test_commit_and_checkpoint_names() -> None:
    assert fn.commit_name(7) == "00000000000000000007.json"
    assert fn.checkpoint_name(10) == "00000000000000000010.checkpoint.parquet"
    assert fn.multipart_checkpoint_names(10, 2) == [
        "00000000000000000010.checkpoint.0000000001.0000000002.parquet",
        "00000000000000000010.checkpoint.0000000002.0000000002.parquet",
    ]
    with pytest.raises(ValueError):
        fn.commit_name(-1)


@pytest.mark.parametrize(
    ("name", "version", "kind", "extra"),
    [
        ("00000000000000000007.json", 7, fn.COMMIT, {}),
        ("00000000000000000010.checkpoint.parquet", 10, fn.CHECKPOINT, {}),
        (
            "00000000000000000010.checkpoint.0000000002.0000000003.parquet",
            10,
            fn.CHECKPOINT,
            {"part": 2, "num_parts": 3},
        ),
        (
            "00000000000000000010.checkpoint.80a083e8-7026-4e79-81be-64bd76c43a11.json",
            10,
            fn.CHECKPOINT,
            {"uuid": "80a083e8-7026-4e79-81be-64bd76c43a11", "fmt": "json"},
        ),
        (
            "00000000000000000010.checkpoint.80a083e8-7026-4e79-81be-64bd76c43a11.parquet",
            10,
            fn.CHECKPOINT,
            {"fmt": "parquet"},
        ),
        ("00000000000000000010.crc", 10, fn.CRC, {}),
        ("00000000000000000004.00000000000000000006.compacted.json", 4, fn.COMPACTION, {"end_version": 6}),
        ("_delta_log/00000000000000000001.json", 1, fn.COMMIT, {}),
    ],
)
def test_parse(name: str, version: int, kind: str, extra: dict) -> None:
    parsed = fn.parse_log_file_name(name)
    assert parsed is not None and parsed.version == version and parsed.kind == kind
    for key, value in extra.items():
        assert getattr(parsed, key) == value


@pytest.mark.parametrize(
    "name",
    ["_last_checkpoint", "7.json", "00000000000000000001.json.tmp", ".00000000000000000001.json.x.tmp", "x"],
)
def test_not_log_files(name: str) -> None:
    assert fn.parse_log_file_name(name) is None
