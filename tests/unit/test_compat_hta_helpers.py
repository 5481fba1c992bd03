"""HTA's trace-file and frame helpers (``hta.common.trace_file``, ``hta.common.trace_df``, ``hta.common.constants``)
against HTA 0.6.1's observed behaviour: each expected value was measured by calling HTA 0.6.1's function on the
same files and frames in a separate environment (the call is named beside it)."""

from __future__ import annotations

import json
import os

import pandas as pd

from tracebuilder import TraceBuilder


def _job(tmp_path):
    d = tmp_path / "job"
    TraceBuilder(rank=3, world_size=4).write(d, name="a.json")
    TraceBuilder(rank=1, world_size=4).write(d, gz=True, name="b.json.gz")
    TraceBuilder(rank=2, world_size=4).write(d, compact=True, name="c.json")  # "rank":2 without a space
    TraceBuilder(rank=None, distributed=False).write(d, name="d.json")
    (d / "notes.txt").write_text("not a trace")
    return d


def test_rank_maps(tmp_path):
    from holotrace import create_rank_to_trace_dict, create_rank_to_trace_dict_from_dir, get_trace_files

    d = _job(tmp_path)
    # HTA: create_rank_to_trace_dict([a, b, d]): ranks from '"rank": N', a file without one is rank 0
    ok, ranks = create_rank_to_trace_dict([str(d / n) for n in ("a.json", "b.json.gz", "d.json")])
    assert ok and {r: os.path.basename(p) for r, p in ranks.items()} == {3: "a.json", 1: "b.json.gz", 0: "d.json"}
    # HTA's expression needs a space after the colon: the compact file is rank 0 (and replaces d.json there)
    ok, one = create_rank_to_trace_dict([str(d / "c.json")])
    assert one == {0: str(d / "c.json")}
    ok, ranks = create_rank_to_trace_dict_from_dir(str(d))
    assert ok and sorted(ranks) == [0, 1, 3] and get_trace_files(str(d)).keys() == ranks.keys()
    assert create_rank_to_trace_dict_from_dir(str(tmp_path / "nope")) == (False, {})  # HTA: (False, {})
    assert get_trace_files(str(tmp_path / "nope")) == {}
    (tmp_path / "empty").mkdir()
    assert create_rank_to_trace_dict_from_dir(str(tmp_path / "empty")) == (False, {})


def test_read_write_update(tmp_path):
    from holotrace import read_trace, update_trace_rank, write_trace

    d = _job(tmp_path)
    assert read_trace(str(d / "b.json.gz"))["distributedInfo"]["rank"] == 1
    out = tmp_path / "w" / "sub" / "x.json"
    write_trace({"traceEvents": [], "distributedInfo": {"world_size": 2}}, str(out))  # folders made
    update_trace_rank(str(out), 5)
    # HTA: read_trace(x.json) after update_trace_rank(x.json, 5)
    assert read_trace(str(out)) == {"traceEvents": [], "distributedInfo": {"world_size": 2, "rank": 5}}
    assert out.read_text().startswith('{\n  "traceEvents": []')  # HTA: 2-space indented JSON
    write_trace({"traceEvents": []}, str(tmp_path / "y.json.gz"))
    assert read_trace(str(tmp_path / "y.json.gz")) == {"traceEvents": []}
    try:
        read_trace(str(d / "notes.txt"))
        raise AssertionError("no error")
    except ValueError as e:
        assert "must end with '.gz' or 'json'" in str(e)
    assert json.loads((d / "a.json").read_text())["distributedInfo"]["rank"] == 3  # inputs left alone


def test_trace_df_helpers_and_constants():
    from holotrace import (
        CUDA_MAX_LAUNCH_QUEUE_PER_STREAM,
        MAX_EVENT_DURATION_US,
        TraceSymbolTable,
        find_events_by_name_patterns_using_decoded_names,
        find_events_by_name_patterns_using_symbol_table,
        find_op_occurrence,
        get_iterations,
    )

    assert (CUDA_MAX_LAUNCH_QUEUE_PER_STREAM, MAX_EVENT_DURATION_US) == (1024, 604_800_000_000)
    df = pd.DataFrame(
        {
            "index": [0, 1, 2, 3, 4],
            "iteration": [-1, 7, 5, 7, -1],
            "ts": [5, 3, 9, 1, 2],
            "s_name": ["a", "b", "a", "a", "ncclKernel"],
            "name": [0, 1, 0, 0, 2],
        }
    )
    assert get_iterations(df) == [5, 7]  # HTA: get_iterations(df)
    assert find_op_occurrence(df, "a", -1)[1]["index"] == 2  # HTA: the last "a" by ts
    assert find_op_occurrence(df, "a", 0)[1]["index"] == 3
    assert find_op_occurrence(df, "zz", 0)[0] is False
    st = TraceSymbolTable()
    st.add_symbols(["a", "b", "ncclKernel"])
    # HTA: sorted(find_events_by_name_patterns_using_symbol_table(df, ["^a", "nccl"], st))
    assert sorted(find_events_by_name_patterns_using_symbol_table(df, ["^a", "nccl"], st)) == [0, 2, 3, 4]
    assert sorted(find_events_by_name_patterns_using_decoded_names(df, ["b", "nc"])) == [1, 4]
    try:
        get_iterations(df.drop(columns=["iteration"]))
        raise AssertionError("no error")
    except TypeError:
        pass


def test_rank_map_warnings_on_hta_logger(tmp_path, caplog):
    """HTA's tests/test_trace_file.py listens on ``hta.configs.config.logger`` for these two warnings."""
    import logging

    from holotrace import create_rank_to_trace_dict
    from holotrace.compat.configs import logger

    d = _job(tmp_path)
    with caplog.at_level(logging.WARNING, logger=logger.name):
        create_rank_to_trace_dict([str(d / "d.json"), str(d / "c.json")])
    text = [r.getMessage() for r in caplog.records if r.name.startswith(logger.name)]
    assert "trace file does not have the rank" in text[0] and "has the same rank" in text[-1]


def test_hta_config_test_data_path(tmp_path, monkeypatch):
    """HTA's tests find their data with ``HtaConfig.get_test_data_path``; here: under the current folder."""
    from holotrace import HtaConfig

    monkeypatch.chdir(tmp_path)
    assert HtaConfig.get_test_data_path("execution_trace") == str(tmp_path / "tests" / "data" / "execution_trace")
