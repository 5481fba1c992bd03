"""``holotrace memory PATH`` as a user runs it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from holotrace.cli import main
from tracebuilder import TraceBuilder


def _trace(tmp_path, with_memory=True):
    tb = TraceBuilder(rank=0)
    tb.cpu_op("aten::empty", 10, 10)
    if with_memory:
        for ts, b, total in ((12, 1048576, 1048576), (15, 2097152, 3145728), (30, -2097152, 1048576)):
            tb.raw(
                {
                    "ph": "i",
                    "s": "t",
                    "cat": "cpu_instant_event",
                    "name": "[memory]",
                    "pid": tb.pid,
                    "tid": 1,
                    "ts": ts,
                    "args": {
                        "Total Reserved": 4194304,
                        "Total Allocated": total,
                        "Bytes": b,
                        "Addr": 1,
                        "Device Id": 0,
                        "Device Type": 1,
                    },
                }
            )
    return tb.write(tmp_path).parent


def test_memory_json(tmp_path, capsys):
    rc = main(["memory", str(_trace(tmp_path)), "--format", "json", "--no-cache"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    peak = out["memory_peaks"][0]
    assert (peak["device"], peak["peak_allocated"], peak["peak_ts"]) == ("cuda:0", 3145728, 15000)
    assert peak["live_operators"] == "aten::empty"
    assert out["allocations_by_operator"][0]["alloc_bytes"] == 3145728


def test_memory_table_without_events(tmp_path, capsys):
    assert main(["memory", str(_trace(tmp_path, with_memory=False)), "--no-cache"]) == 0
    assert "no [memory] events" in capsys.readouterr().out
