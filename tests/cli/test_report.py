"""``holotrace report`` as a user runs it: one self-contained HTML file whose shown numbers are the analyses'."""

from __future__ import annotations

import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import holotrace
from holotrace.analysis import kernels, temporal
from holotrace.model.classify import NATIVE
from holotrace.render.report import SECTIONS, gpu_time_split

JOB = Path(__file__).resolve().parents[1] / "data" / "traces" / "hta_trace_filter_2rank"


def run(*args):
    return subprocess.run([sys.executable, "-m", "holotrace.cli", "report", *args], capture_output=True, text=True)


class _Tables(HTMLParser):
    """Cell texts of every ``<table data-table=...>``; section ids in order; external references."""

    def __init__(self):
        super().__init__()
        self.tables, self.sections, self.external, self._t, self._cell = {}, [], [], None, None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table" and "data-table" in a:
            self._t = self.tables.setdefault(a["data-table"], [])
        elif tag == "tr" and self._t is not None:
            self._t.append([])
        elif tag in ("td", "th") and self._t is not None:
            self._cell = ""
        elif tag == "section":
            self.sections.append(a.get("id"))
        for k in ("src", "href"):
            if a.get(k) and not a[k].startswith("#"):
                self.external.append(a[k])
        if tag == "link":
            self.external.append(str(a))

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self._t[-1].append(self._cell)
            self._cell = None
        elif tag == "table":
            self._t = None


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("report") / "report.html"
    r = run(str(JOB), "-o", str(out), "--no-cache", "--quiet")
    assert r.returncode == 0, r.stderr
    assert f"wrote {out}" in r.stdout
    text = out.read_text(encoding="utf-8")
    p = _Tables()
    p.feed(text)
    return text, p


def _col(rows, i):
    return [float(r[i].replace(",", "")) for r in rows[1:]]


def test_self_contained_in_the_issue_order(report):
    text, p = report
    assert p.sections == list(SECTIONS)
    assert p.external == []  # nothing fetched: no src, no href but in-page anchors, no <link>
    assert not re.search(r"https?://(?!www\.w3\.org/2000/svg)", text)
    assert "default-src 'none'" in text  # and the page forbids any request
    assert len(text.encode()) < 500_000
    assert text.index('id="job"') < text.index("Findings that affect the numbers") < text.index('id="gpu-time"')


def test_numbers_are_the_analysis_frames(report):
    _, p = report
    job = holotrace.load(str(JOB))
    tb = temporal.breakdown(job, rules=NATIVE)
    split = gpu_time_split(tb, kernels.type_breakdown(job, rules=NATIVE, by_rank=True))
    rows = p.tables["gpu_time"]
    # hand-checked on this job: rank 0 span 1,222.847 ms, idle 675.191 ms, compute 210.320 ms
    assert rows[1][1:] == ["210.32", "336.98", "0.35", "675.19", "1,222.85"]
    np.testing.assert_allclose(_col(rows, 2), np.round(split["communication_ms"], 2), atol=0.006)
    # the parts add up to the span
    np.testing.assert_allclose(
        sum(split[c] for c in ("compute_ms", "communication_ms", "memory_ms", "other_ms", "idle_ms")),
        split["span_ms"],
        rtol=1e-9,
    )
    top = kernels.top_kernels(job, rules=NATIVE, top=10)
    np.testing.assert_allclose(_col(p.tables["top_kernels"], 3), np.round(top["sum_us"] / 1e3, 2), atol=0.006)
    assert ["ranks", "0, 1, world size 128"] in p.tables["facts"]


def test_findings_at_the_top(report):
    text, _ = report
    assert 'data-findings="1"' in text and "missing_ranks" in text


def test_timeline_step_and_bad_choices(tmp_path):
    out = tmp_path / "r.html"
    r = run(str(JOB), "-o", str(out), "--timeline-step", "552", "--no-critical-path", "--quiet")
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    assert "GPU operations of step 552" in text and "left out (--no-critical-path)" in text
    bad = run(str(JOB), "-o", str(out), "--timeline-step", "7", "--quiet")
    assert bad.returncode == 2 and "--timeline-step 7 is not a step" in bad.stderr and "[551, 552]" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
    folder = run(str(JOB), "-o", str(tmp_path), "--quiet")
    assert folder.returncode == 2 and "is a folder" in folder.stderr


def test_diff_report_biggest_contributor_first(tmp_path):
    from holotrace.analysis.diff import diff_jobs
    from holotrace.render.report_diff import DIFF_SECTIONS

    out = tmp_path / "diff.html"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "holotrace.cli",
            "diff",
            str(JOB),
            str(JOB),
            "--base-steps",
            "551",
            "--new-steps",
            "552",
            "--fail-on",
            "step_time>+1%",
            "--min-effect",
            "0",
            "--report",
            str(out),
            "--quiet",
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 1, r.stderr  # step 552 is 3.2 % slower than step 551: the rule trips
    p = _Tables()
    p.feed(out.read_text(encoding="utf-8"))
    assert p.sections == list(DIFF_SECTIONS) and p.external == []
    job = holotrace.load(str(JOB))
    d = diff_jobs(job, job, rules=NATIVE, base_steps=[551], new_steps=[552])
    rows = p.tables["contributors"]
    shown = _col(rows, 3)
    assert shown == sorted(shown, key=abs, reverse=True)  # biggest change first
    np.testing.assert_allclose(shown, d.contributors["delta_us"].head(len(shown)) / 1e3, atol=5.01e-4)
    assert rows[1][0] == "idle:host_wait" and rows[1][3] == "121.477"  # 981,898 -> 1,103,375 us of host wait
    text = out.read_text()
    assert "trips step_time&gt;+1%" in text and "19.175 ms slower" in text  # 607,608.064 -> 626,783.488 us


def test_timeline_keeps_the_first_operations_of_a_long_step(monkeypatch):
    import holotrace.render.report as rep
    from holotrace.analysis.timeline import gpu_timeline

    job = holotrace.load(str(JOB))
    tl = gpu_timeline(job, rules=NATIVE, iterations=[551])
    monkeypatch.setattr(rep, "MAX_TIMELINE_OPS", 1000)
    html = rep._timeline_section({"timeline": tl, "timeline_step": 551})
    cut = np.sort(tl["start"].to_numpy())[1000]
    kept = int((tl["start"].to_numpy() < cut).sum())
    assert kept <= 1000 and f'data-events="{kept}"' in html and f"Only the first {kept:,} of {len(tl):,}" in html


def test_sections_rendered_beside_the_advice_are_the_same_html():
    from holotrace.commands.report import report_data
    from holotrace.render.report import ADVICE_FREE, render_report

    job = holotrace.load(str(JOB), cache=False)
    frames = report_data(job, critical_path_rank=1)
    drawn = report_data(job, critical_path_rank=1, render=True)
    assert sorted(drawn["rendered"]) == sorted(ADVICE_FREE) and "timeline" not in drawn  # (their frames let go)
    assert render_report(drawn) == render_report(frames)


def test_critical_path_made_ahead_or_here_the_same(monkeypatch):
    """The critical path made on the side thread while the advice runs (of the rank asked for or guessed), or made
    after the advice (the side thread late, or its guess another rank): the same report."""
    from holotrace.commands import report as report_mod
    from holotrace.render.report import render_report

    job = holotrace.load(str(JOB), cache=False)
    html = render_report(report_mod.report_data(job))
    claimed = []
    real_claim = report_mod._Ahead.claim
    monkeypatch.setattr(report_mod._Ahead, "claim", lambda self, r: claimed.append(real_claim(self, r)) or claimed[-1])
    for guess in (0, 1):  # (one of them is the advice's rank)
        monkeypatch.setattr(report_mod._Ahead, "guess", lambda self, ss, g=guess: setattr(self, "rank", g))
        assert render_report(report_mod.report_data(job, render=True)) == html
    monkeypatch.setattr(report_mod._Ahead, "make", lambda self: None)  # (the advice done first: nothing made ahead)
    assert render_report(report_mod.report_data(job)) == html
    assert claimed[-1] is False
    with pytest.raises(holotrace.errors.AnalysisError, match="critical-path-rank 7"):
        report_mod.report_data(job, critical_path_rank=7)


def test_the_rank_guessed_ahead():
    from holotrace.commands.report import _Ahead
    from holotrace.table import Table

    view = SimpleNamespace(ranks=[0, 1, 2])
    ahead = _Ahead(view, 5, True, None)
    ahead.guess(Table({"rank": np.array([2, 0, 1]), "waited_for_us": np.array([np.nan, 3.0, 3.0])}))
    assert ahead.rank == 0  # (the first of the longest waits; no wait read as none)
    nobody = _Ahead(view, 5, True, None)
    nobody.guess(Table({"rank": np.array([0, 1]), "waited_for_us": np.array([0.0, np.nan])}))
    assert nobody.rank is None
    asked = _Ahead(view, 5, True, 1)
    asked.guess(Table({"rank": np.array([2]), "waited_for_us": np.array([9.0])}))
    assert (
        asked.rank == 1
        and _Ahead(view, 5, True, 7).rank is None
        and _Ahead(SimpleNamespace(ranks=[4]), 5, True, None).rank == 4
    )
