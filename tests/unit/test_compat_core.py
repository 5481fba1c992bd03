"""The HTA-compatible facade itself: imports, constructor forms, signatures, plotting without plotly."""

from __future__ import annotations

import inspect

import pytest
from _core_traces import GEMM, NCCL, mixed_trace

import holotrace
from holotrace import TraceAnalysis
from holotrace.errors import PlottingUnavailableError
from tracebuilder import TraceBuilder


def test_import_paths():
    from holotrace.compat import TraceAnalysis as via_compat
    from holotrace.compat.trace_analysis import TraceAnalysis as via_module

    assert TraceAnalysis is via_compat is via_module


@pytest.mark.parametrize(
    "method,params",
    [
        ("get_temporal_breakdown", {"visualize": False}),
        (
            "get_gpu_kernel_breakdown",
            {
                "visualize": False,
                "duration_ratio": 0.8,
                "num_kernels": 10,
                "include_memory_kernels": True,
                "image_renderer": "",
            },
        ),
        (
            "get_idle_time_breakdown",
            {
                "ranks": None,
                "streams": None,
                "visualize": False,
                "visualize_pctg": True,
                "show_idle_interval_stats": False,
                "consecutive_kernel_delay": 30,
            },
        ),
        ("get_comm_comp_overlap", {"visualize": False}),
        ("get_profiler_steps", {}),
    ],
)
def test_hta_signatures_and_defaults(method, params):
    sig = inspect.signature(getattr(TraceAnalysis, method))
    got = {k: p.default for k, p in sig.parameters.items() if k != "self"}
    assert got == params


def test_constructor_forms(tmp_path):
    d = tmp_path / "job"
    for rank in (0, 1):
        tb = TraceBuilder(rank=rank, world_size=2)
        tb.annotation("ProfilerStep#1", 0, 100)
        tb.annotation("ProfilerStep#2", 100, 100)
        tb.launch_kernel(GEMM, 10, 5, 20, 10 + rank)
        tb.launch_kernel(NCCL, 110, 5, 120, 10, stream=20)
        tb.write(d)
    by_dir = TraceAnalysis(trace_dir=str(d))
    assert by_dir.job.ranks == [0, 1] and by_dir.get_profiler_steps() == [1]
    files = sorted(p.name for p in d.iterdir())
    by_map = TraceAnalysis(trace_files={0: files[0], 1: files[1]}, trace_dir=str(d))
    assert by_map.get_temporal_breakdown()["kernel_time(us)"].tolist() == [10.0, 11.0]
    swapped = TraceAnalysis(trace_files={1: files[0], 0: files[1]}, trace_dir=str(d))  # the caller's numbering wins
    assert swapped.get_temporal_breakdown()["kernel_time(us)"].tolist() == [11.0, 10.0]
    by_list = TraceAnalysis(trace_files=[str(d / f) for f in files], include_last_profiler_step=True)
    assert by_list.get_profiler_steps() == [1, 2]
    with pytest.raises(TypeError, match="trace_files"):
        TraceAnalysis(trace_files="rank-0.json", trace_dir=str(d))


def test_visualize_without_plotly_is_a_typed_error(tmp_path):
    try:
        import plotly  # noqa: F401

        pytest.skip("plotly is installed here; the error path cannot be exercised")
    except ImportError:
        pass
    job = holotrace.load(mixed_trace().write(tmp_path / "t.json"), cache=False)
    ta = TraceAnalysis(job=job)
    for call in (
        lambda: ta.get_temporal_breakdown(visualize=True),
        lambda: ta.get_gpu_kernel_breakdown(visualize=True),
        lambda: ta.get_idle_time_breakdown(visualize=True),
        lambda: ta.get_comm_comp_overlap(visualize=True),
    ):
        with pytest.raises(PlottingUnavailableError, match=r"holotrace\[plot\]"):
            call()
    assert isinstance(PlottingUnavailableError("x"), (ImportError, holotrace.HolotraceError))


def test_visualize_with_plotly_returns_figures_and_same_data(tmp_path):
    pytest.importorskip("plotly")
    job = holotrace.load(mixed_trace().write(tmp_path / "t.json"), cache=False)
    ta = TraceAnalysis(job=job)
    df, _ = ta.get_idle_time_breakdown(visualize=True)
    assert ta.figures and df["stream"].dtype.kind == "i"  # HTA turns streams into text; holotrace does not
    assert ta.get_temporal_breakdown(visualize=True).equals(ta.get_temporal_breakdown())
