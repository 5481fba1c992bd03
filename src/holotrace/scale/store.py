"""The ingest folder: per-rank Arrow tables and summaries, written by ``holotrace ingest``.

Layout of ``DIR``::

    DIR/ingest-<first>-<last>-<pid>.json   one per ingest run: the job's files and ranks, what discovery found
    DIR/rank-000005/                       one per rank, written whole (a temporary folder renamed at the end):
        events.arrow                       the rank's model columns (lz4 Arrow IPC)
        instants.arrow counters.arrow flows.arrow names.arrow   side tables (when not empty)
        strings.arrow                      the string table the id columns point into
        summary.arrow                      the rank's summary: one row per frame (Arrow IPC bytes), and ``info`` (JSON)
    DIR/rank-000005.failed.json            a rank whose file could not be read: the error

Several ingest runs (a job array over disjoint rank ranges, on several machines) may write into one folder
at once: every file they write has a name of its own.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Optional

import pandas as pd
import pyarrow as pa
import pyarrow.ipc as ipc

from holotrace.analysis.rank_summary import RankSummary
from holotrace.errors import TraceFormatError, TraceNotFoundError

__all__ = ["write_rank", "write_failure", "write_manifest", "read_folder", "is_ingest_folder", "rank_dir", "summary_to_bytes",
           "summary_from_bytes"]

FORMAT = 1
_OPTS = ipc.IpcWriteOptions(compression="lz4")


def rank_dir(out: Path, rank: int) -> Path:
    return Path(out) / f"rank-{int(rank):06d}"


def is_ingest_folder(path) -> bool:
    """The folder holds what ``holotrace ingest`` wrote (a manifest)."""
    p = Path(path)
    return p.is_dir() and any(p.glob("ingest-*.json"))


def _write_table(path: Path, table: pa.Table) -> None:
    with pa.OSFile(str(path), "wb") as sink, ipc.new_file(sink, table.schema, options=_OPTS) as w:
        w.write_table(table)


def _frame_bytes(df: pd.DataFrame) -> bytes:
    table = pa.Table.from_pandas(df, preserve_index=False)
    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, table.schema, options=_OPTS) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()


def _frame_of(data: bytes, dtypes: dict) -> pd.DataFrame:
    df = ipc.open_stream(pa.py_buffer(data)).read_all().to_pandas()
    return df.astype({c: t for c, t in dtypes.items() if c in df.columns}) if len(dtypes) else df


def summary_to_bytes(s: RankSummary) -> bytes:
    """One Arrow IPC stream: a row per frame (name, Arrow IPC bytes, dtypes) and the ``info`` JSON."""
    names = list(s.frames)
    table = pa.table({
        "frame": names,
        "data": pa.array([_frame_bytes(s.frames[k]) for k in names], type=pa.binary()),
        "dtypes": [json.dumps({c: str(t) for c, t in s.frames[k].dtypes.items()}) for k in names],
    })
    table = table.replace_schema_metadata({"info": json.dumps(s.info), "rank": str(s.rank), "format": str(FORMAT)})
    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()


def summary_from_bytes(data: bytes, where: str = "") -> RankSummary:
    try:
        table = ipc.open_stream(pa.py_buffer(data)).read_all()
        meta = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
        if int(meta.get("format", -1)) != FORMAT:
            raise ValueError(f"summary format {meta.get('format')} (this holotrace reads {FORMAT})")
        cols = table.to_pydict()
        frames = {n: _frame_of(d, json.loads(t)) for n, d, t in zip(cols["frame"], cols["data"], cols["dtypes"])}
        return RankSummary(int(meta["rank"]), frames, json.loads(meta["info"]))
    except (pa.ArrowException, ValueError, KeyError, json.JSONDecodeError) as e:
        raise TraceFormatError(f"not a readable rank summary: {e}", path=where,
                               fix="ingest this rank again (holotrace ingest PATH --output DIR --ranks R)") from None


def write_rank(out: Path, trace, strings, summary: RankSummary) -> Path:
    """Write one rank's tables and summary under ``out`` (atomically: a temporary folder renamed)."""
    final = rank_dir(out, summary.rank)
    tmp = final.with_name(final.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        _write_table(tmp / "events.arrow", pa.table(dict(trace.columns)))
        for name in ("instants", "counters", "flows", "names"):
            side = getattr(trace, name)
            if len(side):
                _write_table(tmp / f"{name}.arrow", pa.Table.from_pandas(side, preserve_index=False))
        _write_table(tmp / "strings.arrow", pa.table({"string": pa.array(list(strings.table), type=pa.string())}))
        (tmp / "summary.arrow").write_bytes(summary_to_bytes(summary))
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)  # no half-written rank folder is left behind
        raise
    shutil.rmtree(final, ignore_errors=True)
    failed = final.with_name(final.name + ".failed.json")
    if failed.exists():
        failed.unlink()
    os.replace(tmp, final)
    return final


def write_failure(out: Path, rank: int, file: str, problem: str) -> None:
    (Path(out) / f"rank-{int(rank):06d}.failed.json").write_text(json.dumps({"rank": int(rank), "file": file, "problem": problem}))


def write_manifest(out: Path, manifest: dict, first: int, last: int) -> Path:
    p = Path(out) / f"ingest-{first}-{last}-{os.getpid()}.json"
    p.write_text(json.dumps(manifest, indent=1))
    return p


def read_folder(folder, ranks: Optional[set] = None) -> tuple[list[dict], list[tuple[int, Path]], list[dict]]:
    """``(manifests, [(rank, its summary file)], failures)`` of an ingest folder (only ``ranks`` when given); the
    caller reads the summaries one at a time (:func:`summary_from_bytes`)."""
    p = Path(folder)
    if not is_ingest_folder(p):
        raise TraceNotFoundError("no ingest manifest (ingest-*.json) in this folder", path=str(p),
                                 fix="run holotrace ingest PATH --output DIR first, or pass a folder of trace files")
    manifests = []
    for m in sorted(p.glob("ingest-*.json")):
        try:
            manifests.append(json.loads(m.read_text()))
        except (OSError, ValueError) as e:
            raise TraceFormatError(f"unreadable ingest manifest: {e}", path=str(m), fix="ingest again") from None
    summaries, failures = [], []
    for d in sorted(p.glob("rank-*")):
        try:
            r = int(d.name.split("-")[1].split(".")[0])
        except (IndexError, ValueError):
            continue
        if ranks is not None and r not in ranks:
            continue
        if d.is_dir() and (d / "summary.arrow").is_file():
            summaries.append((r, d / "summary.arrow"))
        elif d.name.endswith(".failed.json") and not rank_dir(p, r).is_dir():
            failures.append(json.loads(d.read_text()))
    return manifests, summaries, failures
