"""The analyses' view: per-string rules cached only when they can be found again."""

from __future__ import annotations

import numpy as np

import holotrace
from holotrace.model import classify
from holotrace.model.view import COLUMNS, job_view
from tracebuilder import TraceBuilder


def _view(tmp_path):
    tb = TraceBuilder(rank=0)
    tb.annotation("ProfilerStep#4", 0, 100)
    tb.launch_kernel("ncclDevKernel_AllReduce", 10, 5, 20, 30)
    return job_view(holotrace.load(tb.write(tmp_path / "t.json"), cache=False))


def test_named_rules_are_kept_and_lambdas_are_not(tmp_path):
    v = _view(tmp_path)
    named = v.per_string(classify.is_communication_kernel, missing=False, dtype=bool)
    assert v.per_string(classify.is_communication_kernel, missing=False, dtype=bool) is named
    comm = [v.strings[i] for i in np.flatnonzero(named[:-1])]
    assert comm == ["ncclDevKernel_AllReduce"] and not named[-1]
    for _ in range(3):
        v.per_string(lambda s: s.startswith("Profiler"), missing=False, dtype=bool)
    assert len(v._per_string) == 1  # the lambdas' arrays were not kept
    steps = v.lookup(v[0]["name"], v.per_string(classify.profiler_step_number, prefix="ProfilerStep"))
    assert sorted(set(steps.tolist()) - {-1}) == [4]


def test_columns_made_on_first_use_hold_the_model_values(tmp_path):
    v = _view(tmp_path)[0]
    model = v.model
    assert list(v) == list(COLUMNS)  # every column, in the documented order, before any is made
    assert not v.cols.is_made("row") and not v.cols.is_made("cat")
    # arg() reads the model's rows in order while ``row`` is not made, and the same values once it is
    before = v.arg("correlation")
    assert np.array_equal(before, np.asarray(model["correlation"])) and before.dtype == model["correlation"].dtype
    assert np.array_equal(v["row"], np.arange(v.n)) and v.cols.is_made("row")
    assert np.array_equal(v.arg("correlation"), before)
    cat = v["cat"]
    assert cat.dtype == np.int64 and np.array_equal(cat, np.asarray(model["cat"])) and v["cat"] is cat
    # HTA's link column: -1 without correlation, else the partner's index (0 when the partner is absent)
    ic = v["index_correlation"]
    has = np.asarray(model["correlation"]) >= 0
    assert np.array_equal(ic[~has], np.full((~has).sum(), -1))
    linked = np.flatnonzero(v["partner"] >= 0)
    assert len(linked) == 2 and np.array_equal(ic[linked], v["index"][v["partner"][linked]])


def test_thread_ids_at_rows_without_the_whole_column(tmp_path):
    from holotrace.model.view import take_rows

    v = _view(tmp_path)[0]
    rows = np.array([0, 2], dtype=np.int64)
    pid, tid = v.at("pid", rows), v.at("tid", rows)
    assert not v.cols.is_made("pid") and not v.cols.is_made("tid")  # read from the model's columns
    assert pid.dtype == tid.dtype == np.int64
    assert np.array_equal(pid, v["pid"][rows]) and np.array_equal(tid, v["tid"][rows])  # what the view makes
    assert v.at("pid", rows) is not v["pid"] and np.array_equal(v.at("pid", rows), pid)  # (now from the view's own)
    part = take_rows(v, np.array([1, 2], dtype=np.int64))  # a view of some rows: its own rows, not the model's
    assert np.array_equal(part.at("tid", np.array([1])), v["tid"][[2]])


def test_index_correlation_at_rows_without_the_whole_column(tmp_path):
    from holotrace.model.view import take_rows

    v = _view(tmp_path)[0]
    rows = np.arange(v.n, dtype=np.int64)[::-1]  # every row, in another order
    at = v.at("index_correlation", rows)
    assert not v.cols.is_made("index_correlation") and at.dtype == np.int64
    whole = v["index_correlation"]  # the column made (every row): the same values
    assert np.array_equal(at, whole[rows]) and sorted(set(at.tolist())) == sorted(set(whole.tolist()))
    assert (at > 0).sum() == 2 and (at == -1).any()  # the linked launch and kernel; rows without a correlation
    assert np.array_equal(v.at("index_correlation", rows[:0]), whole[:0])
    part = take_rows(_view(tmp_path)[0], np.array([1, 2], dtype=np.int64))  # a view of some rows: its own column
    assert np.array_equal(part.at("index_correlation", np.array([0, 1])), part["index_correlation"])


def test_a_rank_view_pickles_with_every_column(tmp_path):
    import pickle

    v = _view(tmp_path)[0]
    back = pickle.loads(pickle.dumps(v))
    assert list(back) == list(COLUMNS)
    assert all(np.array_equal(back[k], v[k]) for k in COLUMNS)


def test_narrow_view_columns_keep_their_values_and_frames_keep_int64(tmp_path):
    from holotrace.analysis import launches, timeline

    tb = TraceBuilder(rank=0)
    tb._corr = 70_000  # beyond int16: the model holds correlation as int32
    tb.annotation("ProfilerStep#200", 0, 100)  # a step number beyond int8
    tb.launch_kernel("gemm_kernel", 10, 5, 20, 30, stream=300)  # a stream id beyond int8
    job = holotrace.load(tb.write(tmp_path / "t.json"), cache=False)
    v = job_view(job)[0]
    model = job.rank(0).columns
    for c, m in (("name", "name"), ("partner", "partner"), ("stream", "stream"), ("correlation", "correlation")):
        assert v[c].dtype in (np.int32, np.int64), c  # ids and positions: narrower than int64 where the model is
        assert np.array_equal(v[c], np.asarray(model[m]).astype(np.int64)), c
    assert v["pid"].dtype == np.int64 and v["tid"].dtype == np.int64  # thread keys are packed from them
    assert sorted(set(v["iteration"].tolist()) - {-1}) == [200]
    stats = launches.launch_stats(job, details=True)[0]
    assert stats["correlation"].tolist() == [70_000] and stats["correlation"].dtype == np.int64
    assert stats["stream"].tolist() == [300] and stats["stream"].dtype == np.int64
    assert stats["iteration"].tolist() == [200] and stats["iteration"].dtype == np.int64
    gpu = timeline.gpu_timeline(job)
    assert gpu["stream"].dtype == np.int64 and gpu["iteration"].dtype == np.int64


def test_kind_in_is_numpys_isin():
    rng = np.random.default_rng(2)
    kind = rng.integers(-1, 14, 5000).astype(np.int8)
    for codes in ((), (3,), (classify.Kind.RUNTIME, classify.Kind.DRIVER), classify.GPU_ACTIVITY, classify.CPU_KINDS):
        want = np.isin(kind, [int(c) for c in codes])
        assert np.array_equal(classify.kind_in(kind, codes), want) and classify.kind_in(kind, codes).dtype == bool
    assert np.array_equal(classify.is_gpu_activity(kind), np.isin(kind, [int(c) for c in classify.GPU_ACTIVITY]))


def test_a_shed_view_makes_its_columns_again_to_the_same_values():
    """``JobView.shed`` lets go of every column made but the kept ones and of the ranks' derived values; a column
    read again is made again, equal to the one let go; a view under HTA's rules is left as it is."""
    from corpus import DATA

    job = holotrace.load(str(DATA / "traces" / "hta_trace_filter_2rank"), cache=False)
    view = job_view(job)
    before = {r: {k: np.array(view[r][k]) for k in COLUMNS if k in view[r].cols} for r in view.ranks}
    kept = {r: view[r]["name"] for r in view.ranks}
    rows = view[view.ranks[0]].rows_where("gpu", True)
    assert len(rows) and view[view.ranks[0]]._rows
    view.shed(keep=("name",))
    for r in view.ranks:
        v = view[r]
        assert not v._rows  # derived values let go
        assert [k for k in COLUMNS if v.cols.is_made(k)] == ["name"] and v["name"] is kept[r]
        for k, want in before[r].items():
            got = v[k]
            assert got.dtype == want.dtype and np.array_equal(got, want), k
    assert np.array_equal(view[view.ranks[0]].rows_where("gpu", True), rows)

    hta = job_view(job, classify.HTA)
    made = {r: dict(hta[r].cols) for r in hta.ranks}
    hta.shed()
    assert all(hta[r][k] is a for r, m in made.items() for k, a in m.items())
