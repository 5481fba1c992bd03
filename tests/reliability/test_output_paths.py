"""Every writer checks its destination before any work: a missing folder, a file where a folder is meant, a
folder where a file is meant, a device, a read-only place is one typed line (exit 2), and nothing is written."""

from __future__ import annotations

import os

import pytest
from _reliability import doc, kernel, one_line_error


def _job(env):
    for r in range(2):
        env.write(
            f"job/rank-{r}.json", doc([kernel(f"k{r}", ts=10 * i + r, dur=3 + r) for i in range(50)], rank=r, world=2)
        )
    return str(env.work / "job")


FILE_WRITERS = [  # (argv before the path, the option naming a file)
    (["report"], "-o"),
    (["timeline"], "-o"),
]
FOLDER_WRITERS = [
    (["summary"], "--output"),
    (["ingest"], "--output"),
    (["launches"], "--output"),
]


@pytest.mark.parametrize("cmd,flag", FILE_WRITERS)
@pytest.mark.parametrize(
    "dest,words",
    [
        ("missing/dir/out.html", ("missing/dir", "does not exist", "mkdir -p missing/dir")),
        (".", ("is a folder",)),
        ("/dev/null", ("not a regular file",)),
        ("afile/out.html", ("afile", "is not a folder")),
        ("", ("empty path",)),
    ],
)
def test_file_destination_checked_up_front(env, cmd, flag, dest, words):
    job = _job(env)
    env.write("afile", "x")
    env.freeze()
    r = env.cli(*cmd, job, flag, dest)
    one_line_error(r, *words)
    env.check_untouched()
    assert not env.cache.exists()  # rejected before the load: nothing was decoded


@pytest.mark.parametrize("cmd,flag", FOLDER_WRITERS)
@pytest.mark.parametrize(
    "dest,words",
    [
        ("afile", ("afile", "is a file, not a folder")),
        ("afile/sub", ("afile is a file",)),
        ("/dev/null", ("is a device",)),
        ("/dev/null/sub", ("/dev/null is a device",)),
        ("", ("empty path",)),
    ],
)
def test_folder_destination_checked_up_front(env, cmd, flag, dest, words):
    job = _job(env)
    env.write("afile", "x")
    env.freeze()
    r = env.cli(*cmd, job, flag, dest)
    one_line_error(r, *words)
    env.check_untouched()


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write into read-only folders")
@pytest.mark.parametrize("cmd,flag,dest", [(["report"], "-o", "ro/out.html"), (["summary"], "--output", "ro/sub")])
def test_read_only_folder(env, cmd, flag, dest):
    job = _job(env)
    (env.work / "ro").mkdir()
    os.chmod(env.work / "ro", 0o555)
    r = env.cli(*cmd, job, flag, dest)
    one_line_error(r, "not writable")


def test_missing_folder_of_a_folder_output_is_created(env):
    job = _job(env)
    r = env.cli("summary", job, "--output", "new/sub", "--format", "json")
    assert r.returncode == 0, r.stderr
    assert sorted(p.suffix for p in (env.work / "new" / "sub").iterdir()) and not [
        p for p in (env.work / "new" / "sub").iterdir() if p.name.startswith(".tmp-")
    ]


def test_diff_report_and_sequences_overlay(env):
    job = _job(env)
    env.write("afile", "x")
    one_line_error(env.cli("diff", job, job, "--report", "nowhere/d.html"), "nowhere", "does not exist")
    one_line_error(env.cli("sequences", job, "--op", "x", "--overlay", "afile"), "is a file, not a folder")


def test_straggler_warning_prints_one_percent_sign(env, caplog):
    import logging

    import holotrace
    from holotrace.analysis.stragglers import potential_stragglers

    job = holotrace.load(_job(env), cache=False)
    with caplog.at_level(logging.WARNING, logger="holotrace"):
        assert potential_stragglers(job) == []
    msgs = [r.getMessage() for r in caplog.records if "straggler" in r.getMessage()]
    assert msgs and all("1% of a step" in m and "%%" not in m for m in msgs), msgs
