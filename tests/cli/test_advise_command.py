"""``holotrace advise`` on the two-step job of test_critical_path_command, savings worked by hand.

Step 1 (three 100 us GEMMs launched 4 us apart, GPU-bound, then ``cudaDeviceSynchronize``): 306 us from its
``ProfilerStep`` start to the synchronize's end. Step 2 (ten 2 us GEMMs behind 10 us launch calls, 13 us apart):
132 us. The replay gives both back. By hand:

* GEMMs 2x faster: step 1 ends 150 us sooner (3 x 50 us); step 2 1 us sooner (the last kernel, 2 -> 1 us);
  with --speedup 4 step 1 saves 225 us.
* launch overhead at its floor (calls 2 us; launch-to-kernel delay at the rank's 5th percentile, 7.6 us: the
  13 lags are 4, 98, 192 and ten of 10 us): step 1 is GPU-bound, nothing saved; in step 2 each operator takes
  5 us instead of 13, the last kernel ends at 2056.6 us and the synchronize 1 us later: 74.4 us saved.
* synchronisation removed: the synchronize returns 1 us after it starts; each step ends with its last kernel,
  1 us sooner.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_critical_path_command import GEMM, build_steps

from holotrace.cli import main


@pytest.fixture(scope="module")
def job_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("advise")
    build_steps(folder)
    return folder


def _run(capsys, *args):
    code = main([*args, "--no-cache"])
    out = capsys.readouterr()
    return code, out.out, out.err


def _fixes(doc):
    return {f["fix"]: f for f in doc["fixes"]}


def test_json_contract_and_savings(job_dir, capsys):
    code, out, _ = _run(capsys, "advise", str(job_dir), "--format", "json")
    assert code == 0
    doc = json.loads(out)
    assert set(doc) == {"meta", "fixes", "replay", "costliest_rank"}
    assert all(
        set(f) == {"fix", "rank", "step", "saving_ms", "saving_pct", "predicted_step_ms", "evidence"}
        for f in doc["fixes"]
    )
    assert [(r["step"], r["measured_ms"], r["replayed_ms"], r["error_pct"]) for r in doc["replay"]] == [
        (1, pytest.approx(0.306), pytest.approx(0.306), 0.0),
        (2, pytest.approx(0.132), pytest.approx(0.132), 0.0),
    ]
    f = _fixes(doc)
    assert f["kernel"]["saving_ms"] == pytest.approx((0.150 + 0.001) / 2)
    assert f["kernel"]["evidence"] == [GEMM]
    assert f["launch_overhead"]["saving_ms"] == pytest.approx(0.0744 / 2)
    assert f["launch_overhead"]["saving_pct"] == pytest.approx(100 * 0.0372 / 0.219)
    assert f["host_sync"]["saving_ms"] == pytest.approx(0.001)
    assert f["host_sync"]["evidence"] == ["cudaDeviceSynchronize"]
    assert all(x["rank"] is None and x["step"] is None for x in doc["fixes"])
    # launch overhead is waste worth 17 % of the step: it ranks before the (assumed) kernel speed-up
    assert [x["fix"] for x in doc["fixes"][:2]] == ["launch_overhead", "kernel"]
    assert doc["costliest_rank"] == {"rank": 0, "why": "rank 0 is the only rank"}


def test_one_step(job_dir, capsys):
    _, out, _ = _run(capsys, "advise", str(job_dir), "--step", "1", "--format", "json")
    first = json.loads(out)["fixes"][0]
    assert (first["fix"], first["step"]) == ("kernel", 1)
    assert first["saving_ms"] == pytest.approx(0.150) and first["predicted_step_ms"] == pytest.approx(0.156)
    _, out, _ = _run(capsys, "advise", str(job_dir), "--step", "2", "--format", "json")
    first = json.loads(out)["fixes"][0]
    assert (first["fix"], first["saving_ms"]) == ("launch_overhead", pytest.approx(0.0744))


def test_speedup_option(job_dir, capsys):
    _, out, _ = _run(capsys, "advise", str(job_dir), "--step", "1", "--speedup", "4", "--format", "json")
    assert _fixes(json.loads(out))["kernel"]["saving_ms"] == pytest.approx(0.225)


def test_text_and_markdown(job_dir, capsys):
    code, out, _ = _run(capsys, "advise", str(job_dir), "--step", "1", "--width", "400")
    assert code == 0
    assert f"making a kernel faster ({GEMM}) saves 0.150 ms per step 1 (49.0% of the measured job step" in out
    assert "replay of step 1 reproduces its measured time within 0.00%" in out and "step(s)" not in out
    code, out, _ = _run(capsys, "advise", str(job_dir), "--format", "markdown")
    assert code == 0 and out.startswith("## ") and "launch_overhead" in out


def test_bad_options(job_dir, capsys):
    code = main(["advise", str(job_dir), "--no-cache", "--what-if", "straggler,teleport"])
    err = capsys.readouterr().err
    assert code != 0 and "unknown fix 'teleport'" in err and "Traceback" not in err
    code = main(["advise", str(job_dir), "--no-cache", "--rank", "5"])
    assert code != 0 and "no rank 5" in capsys.readouterr().err
    code = main(["advise", str(job_dir), "--no-cache", "--step", "7"])
    err = capsys.readouterr().err
    assert code != 0 and "step(s) [7] not in the job" in err and "[1, 2]" in err and str(job_dir) in err


def test_analysis_bug_is_not_a_usage_error(job_dir, capsys, monkeypatch):
    """Only the errors advise raises on purpose become one-line usage errors; a bug inside the analysis is not
    dressed up as bad input."""
    import holotrace.commands.advise as cmd

    def broken(*a, **k):
        raise ValueError("an internal slip")

    monkeypatch.setattr(cmd, "job_advice", broken)
    code = main(["advise", str(job_dir), "--no-cache"])
    err = capsys.readouterr().err
    assert code != 0 and "internal error: ValueError: an internal slip" in err and "check --step" not in err


@pytest.fixture(scope="module")
def rank5_dir(tmp_path_factory):
    """The two-step job recorded as rank 5 of 8, the only rank traced."""
    folder = tmp_path_factory.mktemp("advise5")
    build_steps(folder, rank=5, world_size=8)
    return folder


def test_single_rank_not_zero(job_dir, rank5_dir, capsys):
    code, out, err = _run(capsys, "advise", str(rank5_dir), "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    _, ref, _ = _run(capsys, "advise", str(job_dir), "--format", "json")
    ref = json.loads(ref)
    assert doc["fixes"] == ref["fixes"] and doc["replay"] == ref["replay"]  # the same events on another rank
    assert doc["costliest_rank"] == {"rank": 5, "why": "rank 5 is the only rank"}
    code, out, err = _run(capsys, "advise", str(rank5_dir), "--rank", "5", "--format", "json")
    assert code == 0 and json.loads(out)["fixes"] == ref["fixes"], err


def test_tiny_step_in_microseconds(tmp_path, capsys):
    """A trace without ProfilerStep whose GPU work is a few us: the advice says so in us, not '0.000 ms'. One 6 us
    kernel launched at 0 (call 2 us), starting at 4 us: the trace's step is 10 us; the kernel 2x faster saves 3 us."""
    from tracebuilder import TraceBuilder

    tb = TraceBuilder(rank=0)
    tb.launch_kernel(GEMM, 0, 2, 4, 6)
    tb.write(tmp_path)
    code, out, err = _run(capsys, "advise", str(tmp_path), "--width", "400")
    assert code == 0, err
    assert (
        f"making a kernel faster ({GEMM}) saves 3 us per trace (no ProfilerStep) (30.0% of the measured job step, predicted 7 us)"
        in out
    )
    assert "replay of the whole trace (no ProfilerStep) reproduces its measured time within 0.00%" in out
