"""An ingest folder read back as a :class:`~holotrace.model.job.Job`, so that every command reads it as it reads
the trace folder it was made from.

Each whole rank folder (:mod:`holotrace.scale.store`) holds the rank's model columns (derived ones included),
its side tables, its string table and its facts (``trace.json``): the columns are read, their string ids
renumbered into one job string table, and the job validated as :func:`holotrace.load` validates it. Findings
come in the loader's order: what discovery found (the run's manifest), ranks that could not be read, the
ranks' decoding problems, the checks; ranks the folder lacks are an ``incomplete_ingest`` or ``missing_ranks``
finding naming the command that ingests them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

import numpy as np
import pyarrow.ipc as ipc

from holotrace.errors import TraceFormatError
from holotrace.findings import Finding, FindingCode
from holotrace.model.job import Job, RankTrace
from holotrace.model.strings import StringTable
from holotrace.model.validate import validate_job
from holotrace.scale import store
from holotrace.schema import ID_COLUMNS

__all__ = ["load_ingested"]

_SIDE = ("instants", "counters", "flows", "names")


def _columns(path: Path) -> dict:
    with ipc.open_file(str(path)) as f:
        table = f.read_all()
    return {name: table.column(name).to_numpy(zero_copy_only=False) for name in table.column_names}


def _renumber(cols: dict, ids: tuple, lut: np.ndarray) -> None:
    for c in ids:
        if c in cols and cols[c].dtype.kind in "iu":
            cols[c] = lut[cols[c]]  # -1 reads the last slot, which is -1


def load_ingested(folder, *, ranks: Optional[Sequence[int]] = None) -> Job:
    """The job an ingest folder holds (only ``ranks`` when given)."""
    from holotrace.scale.run import _finding, manifest_findings, missing_finding, resume_command

    want = {int(r) for r in ranks} if ranks is not None else None
    manifests, summary_files, failures = store.read_folder(folder, want)
    strings = StringTable()
    traces: dict = {}
    decode: list = []
    for r, summary in summary_files:
        d = summary.parent
        try:
            facts = json.loads((d / "trace.json").read_text(encoding="utf-8"))
            local = _columns(d / "strings.arrow")["string"].tolist()
            events = _columns(d / "events.arrow")
            side = {t: _columns(d / f"{t}.arrow") for t in _SIDE if (d / f"{t}.arrow").is_file()}
            info = store.summary_from_bytes(summary.read_bytes(), str(summary)).info
        except (OSError, ValueError, KeyError) as e:
            raise TraceFormatError(
                f"rank {r} of the ingest folder cannot be read ({e})",
                path=str(d),
                fix=f"ingest it again, or remove {d.name} and ingest it again",
            ) from None
        remap = strings.merge(local)
        lut = np.append(remap, -1).astype(np.int16 if len(strings) < 2**15 else np.int32)
        _renumber(events, ID_COLUMNS["events"], lut)
        for t in side:
            _renumber(side[t], ID_COLUMNS[t], lut)
        traces[r] = RankTrace(
            r,
            facts["file"],
            facts["meta"],
            events,
            side,
            strings,
            ts_is_float=facts["ts_is_float"],
            n_trace_events=facts["n_trace_events"],
            phase_counts=facts["phase_counts"],
            format=facts["format"],
        )
        decode += [_finding(x) for x in info.get("findings_decode", [])]
    findings = manifest_findings(manifests)
    skipped = [(f["file"], f["problem"]) for f in failures]
    findings += [
        Finding.of(
            FindingCode.SKIPPED_FILE,
            f"not loaded, rank {f['rank']} is missing from every number: {f['problem']}",
            rank=int(f["rank"]),
            file=f["file"],
        )
        for f in failures
    ]
    job_ranks = sorted({int(r) for m in manifests for r in m.get("job_ranks", [])})
    have = set(traces) | {int(f["rank"]) for f in failures}
    missing = [r for r in job_ranks if r not in have and (want is None or r in want)]
    if missing:
        findings.append(missing_finding(manifests, folder, missing))
    if not traces:
        raise TraceFormatError(
            "the ingest folder holds no whole rank" + (f" of ranks {sorted(want)}" if want else ""),
            path=str(folder),
            fix=(
                f"resume with: {resume_command(manifests, folder, missing)}"
                if missing
                else "run holotrace ingest PATH --output DIR"
            ),
        )
    job = Job(
        traces=dict(sorted(traces.items())),
        strings=strings,
        findings=findings + decode,
        skipped=skipped,
        path=str(folder),
    )
    job.findings.extend(validate_job(job))
    return job
