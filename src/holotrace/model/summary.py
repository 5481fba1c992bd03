"""Plain facts about a loaded job: files, devices, events by category, steps, span."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from holotrace.findings import rank_ranges
from holotrace.model.job import Job


def job_facts(job: Job) -> dict[str, Any]:
    """Everything ``holotrace info`` shows, as plain JSON-able data."""
    ranks = []
    for r in job.ranks:
        t = job.rank(r)
        c = t.columns
        cats, counts = np.unique(c["cat"], return_counts=True)
        by_cat = {job.strings[int(k)] if k >= 0 else "(none)": int(n) for k, n in zip(cats.tolist(), counts.tolist())}
        kernels = int(np.isin(c["kind"], [10]).sum())
        span_ns = int(c["end_ns"].max() - c["ts_ns"].min()) if t.n_events else 0
        devs = t.meta.get("deviceProperties") or []
        di = t.meta.get("distributedInfo") if isinstance(t.meta.get("distributedInfo"), dict) else {}
        ranks.append(
            {
                "rank": r,
                "file": t.file,
                "size_bytes": Path(t.file).stat().st_size if Path(t.file).exists() else None,
                "trace_events": t.n_trace_events,
                "events": t.n_events,
                "gpu_kernels": kernels,
                "events_by_category": dict(sorted(by_cat.items())),
                "steps": sorted(set(t.step_table["step"].tolist())),
                "span_ms": span_ns / 1e6,
                "device_type": t.device_type,
                "devices": sorted({d.get("name", "?") for d in devs if isinstance(d, dict)}),
                "backend": di.get("backend"),
                "world_size": di.get("world_size"),
                "format": t.format,
                "clock_offset_ns": t.clock_offset_ns,
            }
        )
    sev = {s: sum(1 for f in job.findings if f.severity == s) for s in ("error", "warning", "info")}
    return {
        "path": job.path,
        "ranks": job.ranks,
        "ranks_text": rank_ranges(job.ranks),
        "world_size": job.world_size,
        "per_rank": ranks,
        "skipped_files": [{"file": f, "reason": why} for f, why in job.skipped],
        "findings_by_severity": sev,
        "findings": [f.as_dict() for f in job.findings],
    }
