"""Find the trace files of a job and decide which rank each one is.

Files are recognised by content (a JSON object with ``traceEvents``, or the
legacy bare array of events), gzipped or plain, whatever their names. The rank
comes from ``distributedInfo.rank`` (read as JSON), else from the file name
(``rank-3``, ``rank_3``, ``worker3`` ...), else it is assigned in name order.
Every doubt becomes a finding; ``strict=True`` turns the serious ones into a
:class:`~holotrace.errors.JobConsistencyError`.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Union

from holotrace.errors import HolotraceError, JobConsistencyError, TraceFormatError, TraceNotFoundError, TraceReadError
from holotrace.findings import Finding, FindingCode, rank_ranges
from holotrace.ingest._read import NotATraceError, raw_bytes
from holotrace.ingest._read import split_header as _split_header

SNIFF_BYTES = 4 * 1024 * 1024
MAX_RANK = 1 << 24  # ranks and world sizes at or above this are not believed (no job is that large)
_NAME_RANK = re.compile(r"(?:rank|worker)[-_]?(\d+)", re.IGNORECASE)


@dataclass
class TraceFile:
    path: str
    rank: Optional[int]
    rank_source: str  # "distributedInfo" | "file name" | "assigned"
    header: dict = field(default_factory=dict)

    @property
    def dist(self) -> dict:
        d = self.header.get("distributedInfo")
        return d if isinstance(d, dict) else {}


@dataclass
class Discovery:
    files: list[TraceFile]
    skipped: list[tuple[str, str]]
    findings: list[Finding]


def sniff(path: Path) -> dict:
    """Read a file's head: return its top-level metadata before ``traceEvents``.

    Raises a HolotraceError subclass when the file is not a Kineto trace.
    """
    buf = bytearray()
    for b in raw_bytes(Path(path), 1 << 20, _unreported, None, None):
        buf += b
        end, fmt = _split_header(bytes(buf), str(path)) if len(buf) >= 1 else (-1, "object")
        if end >= 0 or len(buf) >= SNIFF_BYTES:
            break
    if not buf:
        raise TraceFormatError(
            "file is empty (0 bytes)", path=path, fix="the profiler did not finish writing it; re-export the trace"
        )
    end, fmt = _split_header(bytes(buf), str(path))
    if fmt == "array":
        rest = bytes(buf[end:]).lstrip()
        if not rest.startswith(b"{") and not rest.startswith(b"]"):
            raise NotATraceError(
                "JSON array that is not a list of trace events",
                path=path,
                fix="pass a Kineto trace (.json or .json.gz)",
            )
        return {}
    if end < 0:
        import msgspec  # (the decoder's JSON library: a load that decodes nothing imports it only here)

        try:  # a whole JSON document without the key is another kind of file; a cut one is a damaged trace
            msgspec.json.decode(bytes(buf))
        except (msgspec.DecodeError, RecursionError):
            raise TraceFormatError(
                "file is cut off or damaged before its event list", path=path, fix="re-copy or re-export the trace"
            ) from None
        raise NotATraceError(
            "JSON has no 'traceEvents' (not a PyTorch profiler trace)",
            path=path,
            fix="pass the Kineto trace file, e.g. *.pt.trace.json.gz",
        )
    head = bytes(buf[:end])
    head = head[: head.rfind(b'"traceEvents"')].rstrip()
    if head.endswith(b","):
        head = head[:-1]
    top = _plain_header(head + b"}")
    if top is not None:
        return {k: top[k] for k in _HEADER_KEYS if k in top}
    import msgspec

    try:
        raw = msgspec.json.decode(head + b"}", type=dict[str, msgspec.Raw])
    except (msgspec.DecodeError, RecursionError) as e:
        raise TraceFormatError(
            f"not valid JSON before 'traceEvents' ({e})", path=path, fix="the file is damaged; re-export the trace"
        ) from None
    meta = {}
    for k in _HEADER_KEYS:
        if k in raw:
            try:
                meta[k] = msgspec.json.decode(raw[k])
            except (msgspec.DecodeError, RecursionError):
                pass
    return meta


def _unreported(kind: str, detail: str) -> None:
    """A gzip stream cut or damaged in a file's head: what precedes it is read (the decoder reports the problem)."""


_HEADER_KEYS = ("distributedInfo", "schemaVersion", "deviceProperties")


def _plain_header(text: bytes) -> Optional[dict]:
    """``text`` (a trace's head, closed) decoded by the standard library's ``json`` when that gives what the JSON
    library of the decoder (msgspec) gives, else None: no NaN or Infinity, no number out of a float's range, no
    surrogate escape (the decoder refuses those) and an object at the top."""
    if b"\\ud" in text or b"\\uD" in text:
        return None
    try:
        top = json.loads(text, parse_constant=_refuse, parse_float=_finite)
    except (ValueError, RecursionError):  # (JSONDecodeError and UnicodeDecodeError are ValueErrors)
        return None
    return top if isinstance(top, dict) else None


def _refuse(name: str):
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    x = float(text)
    if x in (math.inf, -math.inf):
        raise ValueError(f"{text} is out of range")
    return x


def _rank_of(header: dict) -> Optional[int]:
    d = header.get("distributedInfo")
    if not isinstance(d, dict):
        return None
    r = d.get("rank")
    if isinstance(r, bool):
        return None
    if isinstance(r, str) and r.strip().isdigit() and len(r.strip()) < 10:
        r = int(r)
    if isinstance(r, int) and 0 <= r < MAX_RANK:
        return r
    return None


def _candidates(path: Union[str, Path, Sequence[Union[str, Path]]]) -> tuple[list[Path], bool]:
    """Files to look at, and whether they were named explicitly (errors raise then)."""
    if isinstance(path, (list, tuple)):
        if not path:
            raise TraceNotFoundError("no trace files given")
        out = []
        for p in path:
            q = Path(p)
            if not q.exists():
                raise TraceNotFoundError("file does not exist", path=q, fix="check the path")
            out.append(q)
        return out, True
    p = Path(path)
    if not p.exists():
        raise TraceNotFoundError("path does not exist", path=p, fix="check the path")
    if p.is_file():
        return [p], True
    if not p.is_dir():
        raise TraceReadError(
            "is not a regular file (a FIFO, socket or device)",
            path=p,
            fix="save the trace to a file and pass that file",
        )
    if not os.access(p, os.R_OK | os.X_OK):
        raise TraceReadError("folder is not readable (permission denied)", path=p, fix="check its permissions")
    files = sorted(q for q in p.iterdir() if q.is_file() and not q.name.startswith("."))
    return files, False


# Trace files written from another trace of the folder (HTA's and holotrace's generate_trace_with_counters):
# ``x_with_counters.json.gz`` beside ``x.json.gz``. Loading both would make the rank a duplicate.
DERIVED_MARKERS = ("_with_counters",)


def _drop_derived(files: list[Path], skipped: list, findings: list) -> list[Path]:
    """The files of a folder without those derived from another file of it (each noted as an info finding)."""
    names = {f.name for f in files}
    keep = []
    for f in files:
        origin = next((f.name.replace(m, "") for m in DERIVED_MARKERS if f"{m}.json" in f.name), None)
        if origin is not None and origin != f.name and origin in names:
            reason = f"derived from {origin} (a trace with added counter tracks), not a separate rank"
            skipped.append((str(f), reason))
            findings.append(
                Finding.of(
                    FindingCode.SKIPPED_FILE,
                    f"not loaded: {f.name} is {reason}; load it on its own to analyse it",
                    file=str(f),
                    severity="info",
                )
            )
            continue
        keep.append(f)
    return keep


def discover(path: Union[str, Path, Sequence[Union[str, Path]]], *, strict: bool = False) -> Discovery:
    """Find a job's trace files and their ranks (see the module docstring)."""
    candidates, explicit = _candidates(path)
    skipped: list[tuple[str, str]] = []
    findings: list[Finding] = []
    found: list[TraceFile] = []
    if not explicit:
        candidates = _drop_derived(candidates, skipped, findings)
    for f in candidates:
        try:
            header = sniff(f)
        except HolotraceError as e:
            if explicit:
                raise
            reason = e.problem
            skipped.append((str(f), reason))
            sev = (
                "info" if isinstance(e, NotATraceError) else "error"
            )  # a damaged trace is an error, another kind of file a note
            findings.append(Finding.of(FindingCode.SKIPPED_FILE, f"not loaded: {reason}", file=str(f), severity=sev))
            continue
        rank = _rank_of(header)
        src = "distributedInfo"
        dist = TraceFile(str(f), rank, src, header).dist
        ws = dist.get("world_size")
        for key, bad in (
            ("rank", dist.get("rank") is not None and rank is None),
            ("world_size", ws is not None and not (type(ws) is int and 0 < ws < MAX_RANK)),
        ):
            if bad:
                findings.append(
                    Finding.of(
                        FindingCode.BAD_RANK_INFO,
                        f"distributedInfo.{key} is {str(dist.get(key))[:40]}, not a usable "
                        f"number (a whole number below {MAX_RANK}): it was ignored",
                        file=str(f),
                    )
                )
        if rank is None:
            m = _NAME_RANK.search(f.name)
            if m and len(m.group(1)) < 8:
                rank, src = int(m.group(1)), "file name"
        found.append(TraceFile(str(f), rank, src, header))
    if not found:
        where = str(path) if not isinstance(path, (list, tuple)) else ", ".join(map(str, path))
        extra = f" ({len(skipped)} other files skipped: {skipped[0][1]} ...)" if skipped else ""
        raise TraceNotFoundError(
            f"no PyTorch profiler trace found{extra}",
            path=where,
            fix="point at the folder or file the profiler wrote (*.pt.trace.json[.gz])",
        )
    # ranks nobody stated: assign unused numbers in name order
    unknown = [t for t in found if t.rank is None]
    if unknown:
        used = {t.rank for t in found if t.rank is not None}
        nxt = 0
        for t in unknown:
            while nxt in used:
                nxt += 1
            t.rank, t.rank_source = nxt, "assigned"
            used.add(nxt)
        findings.append(
            Finding.of(
                FindingCode.RANK_ASSIGNED,
                f"{len(unknown)} file(s) state no rank (no distributedInfo.rank, no rank in the file name); assigned rank(s) "
                f"{', '.join(f'{Path(t.path).name} -> {t.rank}' for t in unknown)}",
                count=len(unknown),
            )
        )
    # duplicates: keep the first file of each rank (name order), skip the others loudly
    by_rank: dict[int, list[TraceFile]] = {}
    for t in found:
        by_rank.setdefault(t.rank, []).append(t)  # type: ignore[arg-type]
    files: list[TraceFile] = []
    for r in sorted(by_rank):
        group = by_rank[r]
        files.append(group[0])
        for dup in group[1:]:
            skipped.append((dup.path, f"duplicate of rank {r} ({Path(group[0].path).name})"))
            findings.append(
                Finding.of(
                    FindingCode.DUPLICATE_RANK,
                    f"rank {r} appears in {len(group)} files ({', '.join(Path(g.path).name for g in group)}); only {Path(group[0].path).name} was loaded",
                    rank=r,
                    file=dup.path,
                    count=len(group),
                )
            )
    # one job? compare world size and backend
    ws = {
        t.dist.get("world_size")
        for t in files
        if type(t.dist.get("world_size")) is int and 0 < t.dist.get("world_size") < MAX_RANK
    }
    be = {t.dist.get("backend") for t in files if isinstance(t.dist.get("backend"), str)}
    if len(ws) > 1 or len(be) > 1:
        detail = []
        if len(ws) > 1:
            detail.append(
                "world_size "
                + " vs ".join(
                    f"{w} ({', '.join(Path(t.path).name for t in files if t.dist.get('world_size') == w)})"
                    for w in sorted(ws)
                )
            )
        if len(be) > 1:
            detail.append(
                "backend "
                + " vs ".join(
                    f"{b!r} ({', '.join(Path(t.path).name for t in files if t.dist.get('backend') == b)})"
                    for b in sorted(be)
                )
            )
        findings.append(
            Finding.of(FindingCode.MIXED_JOBS, "files come from different jobs: " + "; ".join(detail), count=len(files))
        )
    if len(ws) == 1:
        world = ws.pop()
        present = {t.rank for t in files}
        n_missing = world - sum(1 for r in present if r is not None and r < world)  # no list as long as world_size
        beyond = sorted(r for r in present if r is not None and r >= world)
        if n_missing:
            findings.append(
                Finding.of(
                    FindingCode.MISSING_RANKS,
                    f"world_size is {world} but {n_missing} rank(s) have no trace: {_gaps(present, world)}; cross-rank numbers cover only ranks {rank_ranges(sorted(present))}",
                    count=n_missing,
                    severity="error" if len(files) > 1 else "info",
                )
            )
        if beyond:
            findings.append(
                Finding.of(
                    FindingCode.RANK_OUT_OF_RANGE,
                    f"rank(s) {rank_ranges(beyond)} are not below world_size {world}",
                    count=len(beyond),
                )
            )
    if strict:
        serious = [f for f in findings if f.severity == "error"]
        if serious:
            raise JobConsistencyError(
                serious[0].message + (f" (+{len(serious) - 1} more problems)" if len(serious) > 1 else ""),
                path=serious[0].file or (str(path) if not isinstance(path, (list, tuple)) else None),
                fix="fix the set of files, or load without --strict to see every finding",
            )
    return Discovery(files, skipped, findings)


def _gaps(present: set, world: int, most: int = 20) -> str:
    """The ranks below ``world`` not in ``present``, as ranges (``'1-3, 7-1023'``), without listing them."""
    out, lo = [], 0
    for r in sorted(x for x in present if x is not None and x < world) + [world]:
        if r > lo:
            out.append(str(lo) if r - 1 == lo else f"{lo}-{r - 1}")
        lo = r + 1
    return ", ".join(out[:most]) + (f" and {len(out) - most} more ranges" if len(out) > most else "")
