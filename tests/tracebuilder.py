"""Build small Kineto traces for tests, with values chosen by hand.

Times are given in microseconds, as Kineto writes them. Every launch gets a
fresh correlation id; every CPU op and its kernels share an External id.

    tb = TraceBuilder(rank=0, world_size=2)
    tb.annotation("ProfilerStep#1", 0, 100)
    tb.launch_kernel("gemm", cpu_ts_us=10, cpu_dur_us=5, gpu_ts_us=20, gpu_dur_us=30)
    path = tb.write(tmp_path)
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any, Optional


class TraceBuilder:
    def __init__(
        self,
        rank: Optional[int] = 0,
        world_size: int = 1,
        *,
        pid: int = 100,
        device: int = 0,
        backend: str = "nccl",
        base_time_ns: Optional[int] = None,
        distributed: bool = True,
    ):
        self.rank = rank
        self.world_size = world_size
        self.pid = pid
        self.device = device
        self.backend = backend
        self.base_time_ns = base_time_ns
        self.distributed = distributed
        self.events: list[dict[str, Any]] = []
        self.extra_top: dict[str, Any] = {}
        self._corr = 1000
        self._ext = 1

    # ---------------------------------------------------------------- CPU side
    def cpu_op(self, name: str, ts_us: float, dur_us: float, tid: int = 1, cat: str = "cpu_op", **args: Any) -> dict:
        a = {"External id": self._next_ext()}
        a.update(_rename(args))
        ev = {"ph": "X", "cat": cat, "name": name, "pid": self.pid, "tid": tid, "ts": ts_us, "dur": dur_us, "args": a}
        self.events.append(ev)
        return ev

    def annotation(self, name: str, ts_us: float, dur_us: float, tid: int = 1, cat: str = "user_annotation") -> dict:
        if cat == "gpu_user_annotation":
            ev = {
                "ph": "X",
                "cat": cat,
                "name": name,
                "pid": self.device,
                "tid": tid,
                "ts": ts_us,
                "dur": dur_us,
                "args": {"External id": self._next_ext()},
            }
        else:
            ev = {
                "ph": "X",
                "cat": cat,
                "name": name,
                "pid": self.pid,
                "tid": tid,
                "ts": ts_us,
                "dur": dur_us,
                "args": {"External id": self._next_ext()},
            }
        self.events.append(ev)
        return ev

    def runtime(
        self,
        name: str,
        ts_us: float,
        dur_us: float,
        tid: int = 1,
        correlation: Optional[int] = None,
        cat: str = "cuda_runtime",
        **args: Any,
    ) -> dict:
        a: dict[str, Any] = {"cbid": 211}
        if correlation is not None:
            a["correlation"] = correlation
        a.update(_rename(args))
        ev = {"ph": "X", "cat": cat, "name": name, "pid": self.pid, "tid": tid, "ts": ts_us, "dur": dur_us, "args": a}
        self.events.append(ev)
        return ev

    # ---------------------------------------------------------------- GPU side
    def gpu(
        self,
        name: str,
        ts_us: float,
        dur_us: float,
        stream: int = 7,
        cat: str = "kernel",
        correlation: Optional[int] = None,
        external_id: Optional[int] = None,
        **args: Any,
    ) -> dict:
        a: dict[str, Any] = {"device": self.device, "stream": stream}
        if correlation is not None:
            a["correlation"] = correlation
        if external_id is not None:
            a["External id"] = external_id
        a.update(_rename(args))
        ev = {
            "ph": "X",
            "cat": cat,
            "name": name,
            "pid": self.device,
            "tid": stream,
            "ts": ts_us,
            "dur": dur_us,
            "args": a,
        }
        self.events.append(ev)
        return ev

    def launch_kernel(
        self,
        name: str,
        cpu_ts_us: float,
        cpu_dur_us: float,
        gpu_ts_us: float,
        gpu_dur_us: float,
        stream: int = 7,
        cat: str = "kernel",
        launch_name: str = "cudaLaunchKernel",
        tid: int = 1,
        external_id: Optional[int] = None,
        **gpu_args: Any,
    ) -> tuple[dict, dict]:
        """A runtime launch on the CPU and the GPU activity it started, linked by correlation."""
        corr = self._corr
        self._corr += 1
        ext = external_id if external_id is not None else self._next_ext()
        cpu = self.runtime(launch_name, cpu_ts_us, cpu_dur_us, tid=tid, correlation=corr, **{"External id": ext})
        gpu = self.gpu(
            name, gpu_ts_us, gpu_dur_us, stream=stream, cat=cat, correlation=corr, external_id=ext, **gpu_args
        )
        self.events.append(
            {"ph": "s", "id": corr, "pid": self.pid, "tid": tid, "ts": cpu_ts_us, "cat": "ac2g", "name": "ac2g"}
        )
        self.events.append(
            {
                "ph": "f",
                "id": corr,
                "pid": self.device,
                "tid": stream,
                "ts": gpu_ts_us,
                "cat": "ac2g",
                "name": "ac2g",
                "bp": "e",
            }
        )
        return cpu, gpu

    def raw(self, event: dict) -> dict:
        self.events.append(event)
        return event

    # ---------------------------------------------------------------- output
    def document(self) -> dict:
        doc: dict[str, Any] = {"schemaVersion": 1}
        if self.distributed:
            info: dict[str, Any] = {"backend": self.backend, "world_size": self.world_size}
            if self.rank is not None:
                info["rank"] = self.rank
            doc["distributedInfo"] = info
        doc["deviceProperties"] = [{"id": self.device, "name": "Test GPU"}]
        meta = [
            {"name": "process_name", "ph": "M", "ts": 0, "pid": self.pid, "tid": 0, "args": {"name": "python"}},
            {"name": "thread_name", "ph": "M", "ts": 0, "pid": self.pid, "tid": 1, "args": {"name": "main"}},
        ]
        doc["traceEvents"] = meta + self.events
        if self.base_time_ns is not None:
            doc["baseTimeNanoseconds"] = self.base_time_ns
        doc["traceName"] = "test"
        doc.update(self.extra_top)
        return doc

    def write(self, path: str | Path, gz: bool = False, name: Optional[str] = None, compact: bool = False) -> Path:
        """Write to ``path`` (a file, or a folder in which a file is named after the rank)."""
        p = Path(path)
        if p.is_dir() or not p.suffix:
            p.mkdir(parents=True, exist_ok=True)
            fname = name or f"rank-{self.rank if self.rank is not None else 0}.pt.trace.json" + (".gz" if gz else "")
            p = p / fname
        text = json.dumps(self.document(), separators=(",", ":") if compact else (", ", ": "))
        if gz or p.suffix == ".gz":
            with gzip.open(p, "wt", encoding="utf-8") as fh:
                fh.write(text)
        else:
            p.write_text(text, encoding="utf-8")
        return p

    def _next_ext(self) -> int:
        e = self._ext
        self._ext += 1
        return e


def _rename(args: dict[str, Any]) -> dict[str, Any]:
    """Accept python-friendly names for common Kineto args."""
    names = {
        "external_id": "External id",
        "input_dims": "Input Dims",
        "input_type": "Input type",
        "collective_name": "Collective name",
        "in_msg_nelems": "In msg nelems",
        "out_msg_nelems": "Out msg nelems",
        "group_size": "Group size",
        "dtype": "dtype",
        "process_group_name": "Process Group Name",
        "sequence_number": "Sequence number",
        "memory_bw": "memory bandwidth (GB/s)",
    }
    return {names.get(k, k): v for k, v in args.items()}
