"""Finding codes: one enum, every emitted code a member of it, every member documented and reachable."""

from __future__ import annotations

import ast
import gzip
import json
import re
from pathlib import Path

import pytest

import holotrace
from holotrace.commands import summary
from holotrace.findings import AFFECTING_CODES, CROSS_RANK_CODES, Finding, FindingCode, Severity
from tracebuilder import TraceBuilder

REPO = Path(__file__).resolve().parents[2]  # the checkout (the package may be installed elsewhere)
SRC = REPO / "src" / "holotrace"
DOC = REPO / "docs" / "loading.md"

# call sites whose code argument is not a literal: each passes on a code built (and checked) elsewhere
PASS_THROUGH = {
    ("model/validate.py", "p.code"),  # a decoding Problem's code, checked by Finding's constructor
    ("ingest/decode.py", "p.code"),  # merging Problems keeps their code
    ("findings.py", "code"),  # Finding.of builds the Finding it was given the code of
    ("scale/run.py", "d['code']"),  # a finding read back from a rank summary, checked by Finding's constructor
    ("model/validate.py", "x['code']"),  # a rank's check, perhaps read back from a cache entry, checked likewise
}


def _code_arg(call: ast.Call, fname: str):
    """The code argument of a Finding(...) / Finding.of(...) / Problem(...) call, or None when it is not one."""
    func = call.func
    if isinstance(func, ast.Name) and func.id == "Problem":
        pos = 0
    elif (
        isinstance(func, ast.Name)
        and func.id in ("Finding", "cls")
        and (func.id == "Finding" or fname == "findings.py")
    ):
        pos = 1
    elif (
        isinstance(func, ast.Attribute)
        and func.attr == "of"
        and isinstance(func.value, ast.Name)
        and func.value.id == "Finding"
    ):
        pos = 0
    else:
        return None
    kw = {k.arg: k.value for k in call.keywords}
    if "code" in kw:
        return kw["code"]
    if len(call.args) > pos:
        return call.args[pos]
    return ast.Constant(None) if any(k.arg is None for k in call.keywords) else None  # Problem(**p): stored problems


def _scan_sources() -> tuple[dict[str, set[str]], list[tuple[str, str]]]:
    """Codes named where findings/problems are built or compared, per module; and the non-literal code arguments."""
    found: dict[str, set[str]] = {}
    dynamic: list[tuple[str, str]] = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        codes: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                arg = _code_arg(node, rel)
                if arg is None:
                    continue
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    codes.add(arg.value)
                elif (
                    isinstance(arg, ast.Attribute) and isinstance(arg.value, ast.Name) and arg.value.id == "FindingCode"
                ):
                    codes.add(FindingCode[arg.attr].value)  # KeyError: not a member
                elif not (isinstance(arg, ast.Constant) and arg.value is None and rel == "ingest/cache.py"):
                    dynamic.append((rel, ast.unparse(arg)))
            elif isinstance(node, ast.Compare) and isinstance(node.left, ast.Attribute) and node.left.attr == "code":
                # p.code in ("missing_time", ...), f.code == "clock_skew"
                for comp in node.comparators:
                    elts = comp.elts if isinstance(comp, (ast.Tuple, ast.List, ast.Set)) else [comp]
                    codes.update(e.value for e in elts if isinstance(e, ast.Constant) and isinstance(e.value, str))
        if codes:
            found[rel] = codes
    return found, dynamic


def _documented() -> dict[str, str]:
    """code -> severity cell of the table in docs/loading.md."""
    rows = re.findall(r"^\| `([a-z_]+)` \| ([^|]+) \|", DOC.read_text(encoding="utf-8"), flags=re.MULTILINE)
    return {code: sev.strip() for code, sev in rows}


# ---------------------------------------------------------------------------- the enum


def test_codes_compare_equal_to_their_strings():
    assert FindingCode.TRUNCATED_JSON == "truncated_json"
    assert f"{FindingCode.CLOCK_SKEW}" == str(FindingCode.CLOCK_SKEW) == "clock_skew"
    assert {"missing_ranks": 1}[FindingCode.MISSING_RANKS] == 1
    assert FindingCode("no_events") is FindingCode.NO_EVENTS
    assert all(c.value == c.name.lower() for c in FindingCode)
    assert all(isinstance(c.severity, Severity) and c.meaning and "\n" not in c.meaning for c in FindingCode)


def test_finding_normalises_code_and_gives_plain_dict():
    f = Finding("warning", "clock_skew", "ranks disagree", rank=1, count=2)
    assert f.code is FindingCode.CLOCK_SKEW
    d = f.as_dict()
    assert type(d["code"]) is str and type(d["severity"]) is str
    assert d == {
        "severity": "warning",
        "code": "clock_skew",
        "rank": 1,
        "file": None,
        "count": 2,
        "message": "ranks disagree",
        "example": None,
    }
    assert json.loads(json.dumps(d)) == d
    assert f.line() == "WARNING clock_skew [rank 1]: ranks disagree"
    assert Finding("error", FindingCode.NO_EVENTS, "m") == Finding("error", "no_events", "m")


def test_finding_of_uses_the_default_severity_unless_given():
    assert Finding.of(FindingCode.MISSING_RANKS, "m").severity == "error"
    assert Finding.of("launch_without_gpu", "m").severity == "info"
    assert Finding.of(FindingCode.MISSING_RANKS, "m", severity="info").severity == "info"


def test_unknown_code_or_severity_raises():
    with pytest.raises(ValueError, match="unknown finding code 'truncated_file'"):
        Finding("error", "truncated_file", "m")
    with pytest.raises(ValueError, match="unknown finding code"):
        Finding.of("damaged_file", "m")
    with pytest.raises(ValueError, match="unknown severity 'fatal'"):
        Finding("fatal", "no_events", "m")


def test_summary_affecting_list_is_the_flagged_members():
    flagged = {c.value for c in FindingCode if c.affects_numbers}
    assert summary.AFFECTING_CODES == AFFECTING_CODES == flagged
    # the three codes the hand-written list named but nothing emits are gone; what was missed is there
    assert not {"bad_duration", "truncated_file", "damaged_file"} & summary.AFFECTING_CODES
    assert {"truncated_json", "truncated_gzip", "missing_time"} <= summary.AFFECTING_CODES
    assert CROSS_RANK_CODES == {
        "missing_ranks",
        "incomplete_ingest",
        "duplicate_rank",
        "mixed_jobs",
        "rank_out_of_range",
        "clock_skew",
    }


# ---------------------------------------------------------------------------- sources and docs


def test_every_code_in_the_sources_is_a_member():
    found, dynamic = _scan_sources()
    members = {c.value for c in FindingCode}
    everywhere = set().union(*found.values())
    assert everywhere - members == set()
    # the scan sees each place that builds findings (a scan that finds nothing would pass vacuously)
    assert {"ingest/discover.py", "ingest/decode.py", "model/validate.py"} <= set(found)
    assert {"truncated_json", "bad_arg_type", "unsupported_phase"} <= found["ingest/decode.py"]
    assert {"missing_ranks", "skipped_file"} <= found["ingest/discover.py"]
    assert {"clock_skew", "launch_without_gpu"} <= found["model/validate.py"]
    # and every member is built somewhere: the enum holds no dead code
    assert members - everywhere == set()
    assert set(dynamic) <= PASS_THROUGH, set(dynamic) - PASS_THROUGH


def test_every_code_is_documented_with_its_severity():
    doc = _documented()
    members = {c.value for c in FindingCode}
    assert set(doc) == members
    for c in FindingCode:
        assert doc[c.value].startswith(c.severity.value), (c.value, doc[c.value])


# ---------------------------------------------------------------------------- the loader on bad inputs


def _write(path: Path, doc: dict | str) -> Path:
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc), encoding="utf-8")
    return path


def _step_rank(folder: Path, rank: int, world: int, *, name=None, steps=True, shift_us=0.0, **kw) -> Path:
    tb = TraceBuilder(rank=rank, world_size=world, **kw)
    if steps:
        tb.annotation("ProfilerStep#1", shift_us, 100)
    tb.launch_kernel("gemm", shift_us + 10, 5, shift_us + 20, 30)
    return tb.write(folder, name=name)


def _job_dir(tmp_path: Path, case: str) -> Path:
    d = tmp_path / case
    d.mkdir()
    return d


def _case_discovery(tmp_path: Path) -> Path:
    """skipped_file, rank_assigned, duplicate_rank, mixed_jobs, no_events."""
    d = _job_dir(tmp_path, "discovery")
    _write(d / "et.json", {"schema": "1.0", "nodes": []})
    _step_rank(d, 0, 4, name="a.json")
    _step_rank(d, 0, 4, name="b.json")
    _step_rank(d, 1, 2, name="c.json", backend="gloo")
    tb = TraceBuilder(rank=None, distributed=False)
    tb.raw({"ph": "i", "cat": "cpu_instant_event", "name": "mark", "pid": 100, "tid": 1, "ts": 5, "s": "t"})
    tb.write(d, name="zzz.json")
    return d


def _case_world(tmp_path: Path) -> Path:
    """missing_ranks, rank_out_of_range, steps_missing_on_ranks, clock_skew."""
    d = _job_dir(tmp_path, "world")
    _step_rank(d, 0, 4)
    _step_rank(d, 6, 4, steps=False, shift_us=5e6)
    return d


def _case_gzip(tmp_path: Path) -> Path:
    """truncated_gzip, truncated_json."""
    tb = TraceBuilder(rank=0)
    for i in range(2000):
        tb.cpu_op(f"op{i % 7}", i * 10, 5)
    data = gzip.compress(json.dumps(tb.document()).encode())
    f = tmp_path / "cut.json.gz"
    f.write_bytes(data[: len(data) * 2 // 3])
    return f


def _case_events(tmp_path: Path) -> Path:
    """non_standard_json, missing_time, negative_duration, absurd_duration, bad_arg_type, unsupported_phase,
    unknown_category, no_category, overlapping_kernels, gpu_without_launch, launch_without_gpu, no_profiler_steps."""
    ev = [
        '{"ph": "X", "cat": "cpu_op", "name": "nan", "pid": 1, "tid": 1, "ts": 1, "dur": NaN}',
        '{"ph": "X", "cat": "cpu_op", "name": "neg", "pid": 1, "tid": 1, "ts": 1, "dur": -5}',
        '{"ph": "X", "cat": "cpu_op", "name": "week", "pid": 1, "tid": 1, "ts": 1, "dur": 700000000000}',
        '{"ph": "X", "cat": "strange_cat", "name": "odd", "pid": 1, "tid": 1, "ts": 2, "dur": 1}',
        '{"ph": "X", "name": "nocat", "pid": 1, "tid": 1, "ts": 3, "dur": 1}',
        '{"ph": "B", "cat": "cpu_op", "name": "open", "pid": 1, "tid": 1, "ts": 4}',
        '{"ph": "E", "cat": "cpu_op", "name": "open", "pid": 1, "tid": 1, "ts": 6}',
        '{"ph": "X", "cat": "kernel", "name": "k1", "pid": 0, "tid": 7, "ts": 10, "dur": 10, "args": {"stream": 7, "correlation": "abc"}}',
        '{"ph": "X", "cat": "kernel", "name": "k2", "pid": 0, "tid": 7, "ts": 15, "dur": 10, "args": {"stream": 7}}',
        '{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 8, "dur": 1, "args": {"correlation": 99}}',
    ]
    text = '{"distributedInfo": {"rank": 0, "world_size": 1}, "traceEvents": [' + ", ".join(ev) + "]}"
    return _write(tmp_path / "events.json", text)


def _case_extremes(tmp_path: Path) -> Path:
    """bad_time, bad_number, bad_rank_info."""
    ev = [
        '{"ph": "X", "cat": "cpu_op", "name": "ok", "pid": 1, "tid": 1, "ts": 1, "dur": 2}',
        '{"ph": "X", "cat": "cpu_op", "name": "inf", "pid": 1, "tid": 1, "ts": 1, "dur": Infinity}',
        '{"ph": "X", "cat": "cpu_op", "name": "huge", "pid": 18446744073709551616, "tid": 1, "ts": 1, "dur": 1}',
    ]
    text = '{"distributedInfo": {"rank": 0, "world_size": -1}, "traceEvents": [' + ", ".join(ev) + "]}"
    return _write(tmp_path / "extremes.json", text)


def _case_trailing(tmp_path: Path) -> Path:
    """trailing_data: a complete gzip stream followed by bytes that are not one."""
    tb = TraceBuilder(rank=0)
    tb.cpu_op("op", 0, 5)
    f = tmp_path / "tail.json.gz"
    f.write_bytes(gzip.compress(json.dumps(tb.document()).encode()) + b"junk")
    return f


CASES = {
    "extremes": (_case_extremes, {"bad_time", "bad_number", "bad_rank_info"}),
    "trailing": (_case_trailing, {"trailing_data"}),
    "discovery": (_case_discovery, {"skipped_file", "rank_assigned", "duplicate_rank", "mixed_jobs", "no_events"}),
    "world": (_case_world, {"missing_ranks", "rank_out_of_range", "steps_missing_on_ranks", "clock_skew"}),
    "gzip": (_case_gzip, {"truncated_gzip", "truncated_json", "no_profiler_steps"}),
    "events": (
        _case_events,
        {
            "non_standard_json",
            "missing_time",
            "negative_duration",
            "absurd_duration",
            "bad_arg_type",
            "unsupported_phase",
            "unknown_category",
            "no_category",
            "overlapping_kernels",
            "gpu_without_launch",
            "launch_without_gpu",
            "no_profiler_steps",
        },
    ),
}


@pytest.fixture(scope="module")
def loaded(tmp_path_factory) -> dict[str, list[Finding]]:
    out = {}
    for case, (make, _) in CASES.items():
        path = make(tmp_path_factory.mktemp(case))
        out[case] = holotrace.load(path, cache=False).findings
    return out


@pytest.mark.parametrize("case", sorted(CASES))
def test_loader_emits_documented_members(loaded, case):
    doc = _documented()
    findings = loaded[case]
    assert all(isinstance(f.code, FindingCode) for f in findings)
    assert all(f.code.value in doc for f in findings)
    assert {f.code.value for f in findings} >= CASES[case][1]


# codes that analyses emit, not the loader (each has its own test beside its analysis)
ANALYSIS_CODES = {FindingCode.NEGATIVE_QUEUE_LENGTH}  # tests/unit/test_counters.py
# codes of reading an ingest folder back (tests/reliability/test_ingest_folder.py)
INGEST_CODES = {FindingCode.INCOMPLETE_INGEST}


def test_bad_inputs_reach_every_code(loaded):
    reached = {f.code for fs in loaded.values() for f in fs}
    assert reached == set(FindingCode) - ANALYSIS_CODES - INGEST_CODES


def test_severity_overrides_are_the_documented_ones(loaded):
    """A finding differs from its code's default severity only where docs/loading.md says so."""
    doc = _documented()
    for fs in loaded.values():
        for f in fs:
            if f.severity != f.code.severity.value:
                assert f.severity in doc[f.code.value], (f.code.value, f.severity)


def test_cross_rank_warning_names_the_flagged_findings(tmp_path):
    job = holotrace.load(_case_world(tmp_path), cache=False)
    warn = job.cross_rank_warning
    flagged = [f for f in job.findings if f.code.cross_rank]
    assert {f.code.value for f in flagged} == {"missing_ranks", "rank_out_of_range", "clock_skew"}
    assert warn == "; ".join(f.message for f in flagged)
    assert "world_size is 4 but 3 rank(s) have no trace: 1-3" in warn
