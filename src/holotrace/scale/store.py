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

import errno
import json
import os
import re
import shutil
from pathlib import Path
from typing import Optional

from holotrace.analysis.rank_summary import RankSummary
from holotrace.atomic import fsync_dir, kill_point, temp_name, write_bytes, write_error
from holotrace.errors import TraceFormatError, TraceNotFoundError
from holotrace.table import Table

__all__ = [
    "write_rank",
    "write_failure",
    "write_manifest",
    "read_folder",
    "is_ingest_folder",
    "rank_dir",
    "summary_to_bytes",
    "summary_from_bytes",
]

FORMAT = 2  # 2: the collectives frame carries group, kind and peer
#: text columns a stored summary frame holds as pandas' ``str`` (when it has rows, or the rank launched kernels for
#: ``launch_worst``); other text columns are ``object``
_STR_COLUMNS = {"kernel_rank_stats": ("kernel_type", "name"), "launch_worst": ("launch", "kernel")}
_RANK_DIR = re.compile(r"^rank-(\d{6})$")
_RANK_FAILED = re.compile(r"^rank-(\d{6})\.failed\.json$")


def _opts():
    import pyarrow.ipc as ipc

    return ipc.IpcWriteOptions(compression="lz4")


def rank_dir(out: Path, rank: int) -> Path:
    return Path(out) / f"rank-{int(rank):06d}"


def is_ingest_folder(path) -> bool:
    """The folder holds what ``holotrace ingest`` wrote (a manifest)."""
    p = Path(path)
    return p.is_dir() and any(p.glob("ingest-*.json"))


def _write_table(path: Path, table) -> None:
    import pyarrow as pa
    import pyarrow.ipc as ipc

    with pa.OSFile(str(path), "wb") as sink, ipc.new_file(sink, table.schema, options=_opts()) as w:
        w.write_table(table)


def _frame_bytes(df) -> bytes:
    import pyarrow as pa
    import pyarrow.ipc as ipc

    table = pa.Table.from_pandas(df, preserve_index=False)
    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, table.schema, options=_opts()) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()


def _stored_frame(name: str, t: Table, info: dict):
    """A summary's table as the pandas frame the stored format holds (its columns' pandas types)."""
    import pandas as pd

    launched = name == "launch_worst" and info.get("launches", 0) > 0
    text = _STR_COLUMNS.get(name, ()) if len(t) or launched else ()
    cols = {c: pd.Series(a, dtype="str" if c in text else object) if a.dtype == object else a for c, a in t.items()}
    return pd.DataFrame(cols, index=pd.RangeIndex(len(t)))


def _frame_of(data: bytes, dtypes: dict):
    import pyarrow as pa
    import pyarrow.ipc as ipc

    df = ipc.open_stream(pa.py_buffer(data)).read_all().to_pandas()
    return df.astype({c: t for c, t in dtypes.items() if c in df.columns}) if len(dtypes) else df


def summary_to_bytes(s: RankSummary) -> bytes:
    """One Arrow IPC stream: a row per frame (name, Arrow IPC bytes, dtypes) and the ``info`` JSON."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    names = list(s.frames)
    frames = [_stored_frame(k, Table.of(s.frames[k]), s.info) for k in names]
    table = pa.table(
        {
            "frame": names,
            "data": pa.array([_frame_bytes(f) for f in frames], type=pa.binary()),
            "dtypes": [json.dumps({c: str(t) for c, t in f.dtypes.items()}) for f in frames],
        }
    )
    table = table.replace_schema_metadata({"info": json.dumps(s.info), "rank": str(s.rank), "format": str(FORMAT)})
    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()


def summary_from_bytes(data: bytes, where: str = "") -> RankSummary:
    import pyarrow as pa
    import pyarrow.ipc as ipc

    try:
        table = ipc.open_stream(pa.py_buffer(data)).read_all()
        meta = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
        if int(meta.get("format", -1)) != FORMAT:
            raise ValueError(f"summary format {meta.get('format')} (this holotrace reads {FORMAT})")
        cols = table.to_pydict()
        frames = {
            n: Table.of(_frame_of(d, json.loads(t))) for n, d, t in zip(cols["frame"], cols["data"], cols["dtypes"])
        }
        return RankSummary(int(meta["rank"]), frames, json.loads(meta["info"]))
    except (pa.ArrowException, ValueError, KeyError, json.JSONDecodeError) as e:
        raise TraceFormatError(
            f"not a readable rank summary: {e}",
            path=where,
            fix="ingest this rank again (holotrace ingest PATH --output DIR --ranks R)",
        ) from None


def write_rank(out: Path, trace, strings, summary: RankSummary, source: Optional[dict] = None) -> Path:
    """Write one rank's tables and summary under ``out``, atomically: every file is written and flushed to the
    disk in a hidden temporary folder, which is then renamed into place. ``source``: the trace file's
    fingerprint (``trace.json`` keeps it, so that a later run skips a rank already ingested from that file).

    A rank folder another run put there meanwhile (two runs over overlapping ranges) is kept: both were made
    from the same file. A stale one (its file changed since) is replaced."""
    import pyarrow as pa

    final = rank_dir(out, summary.rank)
    tmp = Path(out) / temp_name(final.name)
    tmp.mkdir(parents=True)
    try:
        _write_table(tmp / "events.arrow", pa.table(dict(trace.columns)))
        for name in ("instants", "counters", "flows", "names"):
            side = getattr(trace, name)
            if len(side):
                _write_table(tmp / f"{name}.arrow", pa.Table.from_pandas(side, preserve_index=False))
        _write_table(tmp / "strings.arrow", pa.table({"string": pa.array(list(strings.table), type=pa.string())}))
        (tmp / "summary.arrow").write_bytes(summary_to_bytes(summary))
        facts = {
            "rank": int(summary.rank),
            "file": str(trace.file),
            "meta": trace.meta,
            "ts_is_float": bool(trace.ts_is_float),
            "n_trace_events": int(trace.n_trace_events),
            "phase_counts": dict(trace.phase_counts),
            "format": trace.format,
            "source": source,
        }
        (tmp / "trace.json").write_text(
            json.dumps(facts, default=str), encoding="utf-8"
        )  # last: a rank folder is whole with it
        for f in tmp.iterdir():
            with open(f, "rb") as fh:
                os.fsync(fh.fileno())
        fsync_dir(tmp)
        kill_point("rank")
        _put(tmp, final, source)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)  # no half-written rank folder is left behind
        raise write_error(e, final) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    failed = final.with_name(final.name + ".failed.json")
    try:
        failed.unlink()
    except FileNotFoundError:
        pass
    fsync_dir(out)
    return final


def _put(tmp: Path, final: Path, source: Optional[dict]) -> None:
    """Rename the whole folder ``tmp`` to ``final``: a fresh folder of another run there is kept, a stale one replaced."""
    for _ in range(3):
        try:
            os.rename(tmp, final)
            return
        except OSError as e:
            if e.errno not in (errno.EEXIST, errno.ENOTEMPTY, errno.EISDIR):
                raise
        if source is not None and rank_source(final) == source:
            shutil.rmtree(tmp, ignore_errors=True)  # another run wrote this rank from the same file: keep theirs
            return
        old = final.with_name(temp_name("old_" + final.name))
        try:
            os.rename(final, old)
        except FileNotFoundError:
            continue
        shutil.rmtree(old, ignore_errors=True)
    os.rename(tmp, final)


def rank_source(folder: Path) -> Optional[dict]:
    """The fingerprint of the file a whole rank folder was written from (None: not whole, or written before it was kept)."""
    try:
        facts = json.loads((Path(folder) / "trace.json").read_text(encoding="utf-8"))
        return facts.get("source") if (Path(folder) / "summary.arrow").is_file() else None
    except (OSError, ValueError, AttributeError):
        return None


def write_failure(out: Path, rank: int, file: str, problem: str) -> None:
    write_bytes(
        Path(out) / f"rank-{int(rank):06d}.failed.json",
        json.dumps({"rank": int(rank), "file": file, "problem": problem}).encode(),
    )


def manifest_path(out: Path, first: int, last: int) -> Path:
    """A name of its own for one ingest run's manifest (runs on several machines may share a pid)."""
    return Path(out) / f"ingest-{first}-{last}-{os.getpid()}-{os.urandom(3).hex()}.json"


def write_manifest(out: Path, manifest: dict, first: int, last: int, path: Optional[Path] = None) -> Path:
    """Write (or, with ``path``, rewrite) one run's manifest atomically."""
    p = path or manifest_path(out, first, last)
    write_bytes(p, json.dumps(manifest, indent=1).encode())
    return p


def read_folder(folder, ranks: Optional[set] = None) -> tuple[list[dict], list[tuple[int, Path]], list[dict]]:
    """``(manifests, [(rank, its summary file)], failures)`` of an ingest folder (only ``ranks`` when given); the
    caller reads the summaries one at a time (:func:`summary_from_bytes`)."""
    p = Path(folder)
    if not is_ingest_folder(p):
        raise TraceNotFoundError(
            "no ingest manifest (ingest-*.json) in this folder",
            path=str(p),
            fix="run holotrace ingest PATH --output DIR first, or pass a folder of trace files",
        )
    manifests = []
    for m in sorted(p.glob("ingest-*.json")):
        try:
            manifests.append(dict(json.loads(m.read_text()), _file=m.name))
        except (OSError, ValueError) as e:
            raise TraceFormatError(f"unreadable ingest manifest: {e}", path=str(m), fix="ingest again") from None
    summaries, failures = [], []
    for d in sorted(p.glob("rank-*")):  # only whole rank folders: temporary ones are hidden (a leading dot)
        m = _RANK_DIR.match(d.name) or _RANK_FAILED.match(d.name)
        if m is None:
            continue
        r = int(m.group(1))
        if ranks is not None and r not in ranks:
            continue
        if d.is_dir() and (d / "summary.arrow").is_file():
            summaries.append((r, d / "summary.arrow"))
        elif d.name.endswith(".failed.json") and not rank_dir(p, r).is_dir():
            try:
                failures.append(json.loads(d.read_text()))
            except (OSError, ValueError):
                continue
    return manifests, summaries, failures
