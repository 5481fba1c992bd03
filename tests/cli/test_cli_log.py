"""The CLI's stderr: one handler; each warning once with its count; INFO only with -v; --quiet silences both."""

from __future__ import annotations

import logging

import pytest

from corpus import DATA
from holotrace.cli import main
from holotrace.commands._log import run_logging

JOB = DATA / "traces" / "hta_trace_filter_2rank"  # its critical paths carry zeroed negative weights (an info fact)


def test_repeats_of_a_warning_print_once_with_their_count(capsys):
    log = logging.getLogger("holotrace.analysis.some")
    with run_logging():
        for step in (3, 4, 5):
            log.warning("step %d: 2 launch calls skipped", step)
        log.warning("another \x1b[31mthing")
        log.info("a fact")
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "holotrace: warning: step 3: 2 launch calls skipped (3 times; the first shown)",
        "holotrace: warning: another \\x1b[31mthing",
    ]


def test_verbose_shows_info_once_and_quiet_silences_warnings(capsys):
    log = logging.getLogger("holotrace.loader")
    with run_logging(verbose=True):
        log.info("loaded %d rank(s)", 2)
        log.info("loaded %d rank(s)", 2)
    assert capsys.readouterr().err.splitlines() == [
        "holotrace: loaded 2 rank(s)",
        "holotrace: 2 times in all: loaded 2 rank(s)",
    ]
    with run_logging(quiet=True):
        log.warning("not shown")
        log.info("nor this")
    assert capsys.readouterr().err == ""
    # the logger is left as it was
    assert not logging.getLogger("holotrace").handlers


@pytest.mark.parametrize("command", ["summary", "advise", "critical-path"])
def test_default_level_prints_no_informational_line(capsys, command):
    assert main([command, str(JOB), "--no-cache"]) == 0
    assert capsys.readouterr().err == ""
    assert main([command, str(JOB), "--no-cache", "-v"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert any("loaded 2 rank(s)" in line for line in err)
    assert len(err) == len(set(err))
