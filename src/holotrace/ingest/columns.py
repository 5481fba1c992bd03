"""From one scanned piece to the columns of each table, with numpy only.

The scanner (``_scan``) returns every event's fixed fields and the configured args as column
buffers with piece-local string ids. Here the ids become the file's ids, events with a duration
are split from the side tables (instants, counters, flows, names), each category keeps only the
args it carries, and invalid times are left out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from holotrace.findings import FindingCode, Severity
from holotrace.ingest import _scan
from holotrace.ingest.ids_used import IdsUsed
from holotrace.order_stats import distinct
from holotrace.schema import ARG_SPECS, ID_COLUMNS, META_ARG_SPECS, compact_ints  # noqa: F401  (part of this module's interface)

_MAX_DUR_NS = 7 * 24 * 3600 * 10**9  # a week
_SPECS = ARG_SPECS + META_ARG_SPECS
# kinds of the scanner: 0 int, 1 label (int, or -1 for a text label such as "0x0"), 2 float, 3 str, 4 raw JSON text,
# 5 text (strings decoded, other values as written), 6 int written as a number or a "0x.." string
_KIND = {"int": 0, "float": 2, "str": 3, "raw": 4}
_KINDS = [
    1
    if s.column in ("stream", "device")
    else 5
    if s.column.startswith("m_")
    else 6
    if s.column.startswith("mem_")
    else _KIND[s.kind]
    for s in _SPECS
]
_scan.configure([s.raw_key.encode() for s in _SPECS], _KINDS, [s.default for s in _SPECS])
_DTYPE = {0: np.int64, 1: np.int64, 2: np.float64, 3: np.int32, 4: np.int32, 5: np.int32, 6: np.int64}
_INDEX = {s.column: j for j, s in enumerate(_SPECS)}
N_ARGS = len(ARG_SPECS)
_WIDE_COLUMNS = frozenset({"index", "ts_ns", "dur_ns", "value"})
_TOP_FIELDS = {-2: "pid", -3: "tid", -4: "id"}

# Which args each category carries (lower-cased category); other categories get every arg.
# the collective fields the record_param_comms operator and a collective kernel both carry
_COLLECTIVE_ARGS = (
    "collective_name",
    "in_msg_nelems",
    "out_msg_nelems",
    "in_msg_size",
    "out_msg_size",
    "group_size",
    "msg_dtype",
    "in_split_size",
    "out_split_size",
    "process_group_name",
    "process_group_desc",
    "process_group_ranks",
    "process_rank",
    "seq_num",
    "p2p_src",
    "p2p_dst",
)
_CPU_OP_ARGS = (
    "external_id",
    "external_id_legacy",
    "ev_idx",
    "sequence",
    "fwd_thread_id",
    "input_dims",
    "input_type",
    "input_strides",
    *_COLLECTIVE_ARGS,
    "kernel_backend",
    "kernel_hash",
    "stream",
)
_LAUNCH_ARGS = (
    "correlation",
    "external_id",
    "external_id_legacy",
    "cbid",
    "stream",
    "device",
    "stream_id",
    "grid",
    "block",
)
_KERNEL_ARGS = (
    "stream",
    "correlation",
    "external_id",
    "external_id_legacy",
    "device",
    "grid",
    "block",
    *_COLLECTIVE_ARGS,
    "stream_id",
)
_MEM_ARGS = (
    "stream",
    "correlation",
    "external_id",
    "external_id_legacy",
    "device",
    "bytes",
    "memory_bw_gbps",
    "stream_id",
)
_SYNC_ARGS = (
    "stream",
    "correlation",
    "external_id",
    "external_id_legacy",
    "device",
    "wait_on_stream",
    "wait_on_cuda_event_record_corr_id",
    "cuda_sync_kind",
)
_ANNOT_ARGS = ("external_id", "external_id_legacy", "ev_idx", "device", "stream", "correlation")
_PY_ARGS = ("python_id", "python_parent_id", "external_id")
ARGS_BY_CATEGORY: dict[str, tuple[str, ...]] = {
    cat: cols
    for cats, cols in (
        (("cpu_op", "operator"), _CPU_OP_ARGS),
        (("user_annotation", "gpu_user_annotation"), _ANNOT_ARGS),
        (("cuda_runtime", "runtime", "cuda_driver", "mtia_runtime"), _LAUNCH_ARGS),
        (("kernel", "mtia_ccp_events"), _KERNEL_ARGS),
        (("gpu_memcpy", "gpu_memset", "memcpy", "memset"), _MEM_ARGS),
        (("cuda_sync",), _SYNC_ARGS),
        (("python_function",), _PY_ARGS),
        (("trace",), ()),
    )
    for cat in cats
}
_ALLOW: dict[str, np.ndarray] = {}


def _allowed(cat: str) -> np.ndarray:
    """Which of ARG_SPECS a category keeps (by lower-cased name)."""
    key = cat.lower()
    a = _ALLOW.get(key)
    if a is None:
        cols = ARGS_BY_CATEGORY.get(key)
        a = np.ones(N_ARGS, dtype=bool) if cols is None else np.array([s.column in cols for s in ARG_SPECS], dtype=bool)
        _ALLOW[key] = a
    return a


def column_name(j: int) -> str:
    return _SPECS[j].column if j >= 0 else _TOP_FIELDS.get(j, "?")


@dataclass
class Problem:
    """Something found while decoding; becomes a validation finding.

    ``message`` never holds the count: ``count`` does, and a counted problem's text starts with it once
    problems are merged (``text()``); problems merge on (code, message), summing their counts.
    """

    code: FindingCode
    message: str
    count: int = 1
    example: Optional[str] = None
    severity: Optional[str] = None  # the code's default when None
    counted: bool = False  # the text reads "<count> <message>"

    def __post_init__(self) -> None:
        self.code = FindingCode.parse(self.code)
        self.severity = Severity(self.severity or self.code.severity).value

    def text(self) -> str:
        return f"{self.count} {self.message}" if self.counted else self.message


_W_TS, _W_DUR = -10, -11  # what a bad value was (scanner): ts, dur; -2/-3/-4 pid/tid/id; >= 0 an arg column


@dataclass
class PieceOut:
    tables: dict = field(default_factory=dict)
    phase_counts: dict = field(default_factory=dict)
    problems: list = field(default_factory=list)  # (Problem, piece-local event position of its example or None)
    bad: dict = field(default_factory=dict)  # column -> (count, example, default)
    raw_args: list = field(default_factory=list)


def _us(ns: int, valid: bool):
    if not valid:
        return None
    return ns // 1000 if ns % 1000 == 0 else ns / 1000


def piece_strings(r: dict) -> list[str]:
    """The piece's own string table (ids as the scanner numbered them)."""
    blob, offs = r["sblob"], np.frombuffer(r["soff"], dtype=np.int64).tolist()
    return [blob[a:b].decode("utf-8") for a, b in zip(offs[:-1], offs[1:])]


def piece_tables(r: dict, piece: bytes, strings: list, all_args: bool) -> PieceOut:
    """The tables of one scanned piece, with the piece's string ids and row positions from 0.

    Runs on the scanning threads (numpy releases the GIL); ``to_file`` then renumbers, in file order.
    """
    out = PieceOut()
    n = r["n"]
    base = 0
    flags = np.frombuffer(r["flags"], dtype=np.uint8)

    def ids(key: str) -> np.ndarray:
        return np.frombuffer(r[key], dtype=np.int32)

    def arg(j: int) -> Optional[np.ndarray]:
        b = r["args"].get(j)
        return None if b is None else np.frombuffer(b, dtype=_DTYPE[_KINDS[j]])

    ph, cat, name = ids("ph"), ids("cat"), ids("name")
    pid, tid = np.frombuffer(r["pid"], dtype=np.int64), np.frombuffer(r["tid"], dtype=np.int64)
    ts, dur = np.frombuffer(r["ts"], dtype=np.int64), np.frombuffer(r["dur"], dtype=np.int64)
    u, c = np.unique(ph, return_counts=True)
    out.phase_counts = {(strings[k] if k >= 0 else "None"): v for k, v in zip(u.tolist(), c.tolist())}
    has_dur = (flags & 2).astype(bool)
    badv = np.frombuffer(r["badv"], dtype=np.int64).reshape(-1, 4)
    badv = badv[badv[:, 0] < n]
    ovf = np.zeros(n, dtype=bool)
    ovf[badv[(badv[:, 1] != _W_TS) & (badv[:, 1] != _W_DUR), 0]] = True
    ev = np.flatnonzero(has_dur)
    if len(ev):
        _events(
            out,
            r,
            piece,
            ev,
            len(ev) == n,
            cat,
            name,
            pid,
            tid,
            ts,
            dur,
            flags,
            arg,
            strings,
            base,
            all_args,
            has_dur,
            ovf,
            badv,
        )
    if len(ev) < n:
        side = ~has_dur
        drop_t = side & ((flags & 8) != 0) & ~ovf
        drop_o = side & ovf
        if drop_t.any() or drop_o.any():
            _note_bad(out, piece, badv, drop_t, drop_o, name, strings, "other events")
            side = side & ~drop_t & ~drop_o
        _side(out, r, side, ph, cat, name, pid, tid, ts, ids, arg, strings, base)
    return out


def _note_bad(
    out: PieceOut, piece, badv: np.ndarray, bad_time: np.ndarray, overflow: np.ndarray, name, strings, what: str
) -> None:
    """Problems for rows left out for an unusable ts/dur (``bad_time``) or a too big integer (``overflow``)."""
    for mask, code, text in (
        (
            bad_time,
            FindingCode.BAD_TIME,
            "have a ts/dur that is not a usable number (Infinity, text, beyond 146 years); they were left out",
        ),
        (overflow, FindingCode.BAD_NUMBER, "have an integer that does not fit in 64 bits; they were left out"),
    ):
        cnt = int(mask.sum())
        if not cnt:
            continue
        is_time = (badv[:, 1] == _W_TS) | (badv[:, 1] == _W_DUR)
        rows = badv[mask[badv[:, 0]] & (is_time if code is FindingCode.BAD_TIME else ~is_time)]
        row, w, a, length = (int(x) for x in rows[0]) if len(rows) else (int(np.argmax(mask)), 0, 0, 0)
        field_name = "ts" if w == _W_TS else "dur" if w == _W_DUR else column_name(w)
        value = bytes(piece[a : a + min(length, 80)]).decode("utf-8", "replace") + ("..." if length > 80 else "")
        nid = int(name[row])
        example = f"name={strings[nid] if nid >= 0 else None!r} {field_name}={value}"
        if code is FindingCode.BAD_TIME:
            out.problems.append((Problem(FindingCode.BAD_TIME, f"{what} {text}", cnt, example, counted=True), row))
        else:
            out.problems.append((Problem(FindingCode.BAD_NUMBER, f"{what} {text}", cnt, example, counted=True), row))


def _events(
    out, r, piece, ev, whole, cat, name, pid, tid, ts, dur, flags, arg, strings, base, all_args, has_dur, ovf, badv
) -> None:
    def sel(a):
        return a if whole else a[ev]

    m = len(ev)
    e_cat, e_name, e_ts, e_dur, e_flags, e_ovf = sel(cat), sel(name), sel(ts), sel(dur), sel(flags), sel(ovf)
    ok = ((e_flags & 5) == 5) & ~e_ovf
    bad_t = ((e_flags & 24) != 0) & ~e_ovf
    missing = ~ok & ~bad_t & ~e_ovf
    neg = (e_dur < 0) & ok
    long = (e_dur > _MAX_DUR_NS) & ok

    def who(i: int) -> tuple:
        nid = int(e_name[i])
        return int(ev[i]), strings[nid] if nid >= 0 else None

    if missing.any():
        i = int(np.argmax(missing))
        f = int(e_flags[i])
        pos, nm = who(i)
        written = {
            int(w): bytes(piece[a : a + min(n, 40)]).decode("utf-8", "replace")
            for row, w, a, n in badv[badv[:, 0] == pos].tolist()
        }
        out.problems.append(
            (
                Problem(
                    FindingCode.MISSING_TIME,
                    "events with a duration have no ts or dur (missing, null or NaN); they were left out",
                    int(missing.sum()),
                    f"name={nm!r} ts={written.get(_W_TS, _us(int(e_ts[i]), bool(f & 1)))} "
                    f"dur={written.get(_W_DUR, _us(int(e_dur[i]), bool(f & 4)))}",
                    counted=True,
                ),
                pos,
            )
        )
    if bad_t.any() or e_ovf.any():
        full_t, full_o = np.zeros(len(flags), dtype=bool), np.zeros(len(flags), dtype=bool)
        full_t[ev[bad_t]] = True
        full_o[ev[e_ovf]] = True
        _note_bad(out, piece, badv, full_t, full_o, name, strings, "events with a duration")
    if neg.any():
        i = int(np.argmax(neg))
        pos, nm = who(i)
        out.problems.append(
            (
                Problem(
                    FindingCode.NEGATIVE_DURATION,
                    "events have a negative duration; they were left out",
                    int(neg.sum()),
                    f"name={nm!r} dur={_us(int(e_dur[i]), True)!r}",
                    counted=True,
                ),
                pos,
            )
        )
    if long.any():
        i = int(np.argmax(long))
        pos, nm = who(i)
        out.problems.append(
            (
                Problem(
                    FindingCode.ABSURD_DURATION,
                    "events last longer than 7 days",
                    int(long.sum()),
                    f"name={nm!r} dur={_us(int(e_dur[i]), True)!r}",
                    counted=True,
                ),
                pos,
            )
        )
    keep = ok & ~neg
    cols = {
        "cat": e_cat,
        "name": e_name,
        "pid": sel(pid),
        "tid": sel(tid),
        "ts_ns": e_ts,
        "index": base + ev,
        "dur_ns": e_dur,
    }
    uniq, inv = np.unique(e_cat, return_inverse=True)
    allow = np.stack([_allowed(strings[k] if k >= 0 else "") for k in uniq.tolist()])
    for j, spec in enumerate(ARG_SPECS):
        a = arg(j)
        if a is None:
            cols[spec.column] = np.full(m, spec.default, dtype=np.float64 if _KINDS[j] == 2 else np.int8)
            continue
        a = sel(a).copy() if whole else a[ev]
        if not allow[:, j].all():
            a[~allow[inv, j]] = spec.default
        cols[spec.column] = a
    bad = np.frombuffer(r["bad"], dtype=np.int32).reshape(-1, 2)
    if len(bad):
        counts: dict[int, int] = {}
        for row, j in bad.tolist():
            if row < len(has_dur) and has_dur[row] and j < N_ARGS:
                cid = int(cat[row])
                if _allowed(strings[cid] if cid >= 0 else "")[j]:
                    counts[j] = counts.get(j, 0) + 1
        for j, cnt in counts.items():
            s, length = r["bad_ex"].get(j, (0, 0))
            out.bad[ARG_SPECS[j].column] = (
                cnt,
                bytes(piece[s : s + length]).decode("utf-8", "replace"),
                ARG_SPECS[j].default,
            )
    if not keep.all():
        cols = {k: v[keep] for k, v in cols.items()}
    out.tables["events"] = {k: (v if k in _WIDE_COLUMNS else compact_ints(v)) for k, v in cols.items()}
    if all_args:
        spans = np.frombuffer(r["spans"], dtype=np.int64).reshape(-1, 2)[ev][keep]
        out.raw_args = [bytes(piece[s:e]).decode("utf-8", "replace") if s >= 0 else None for s, e in spans.tolist()]


def _side(out, r, side, ph, cat, name, pid, tid, ts, ids, arg, strings, base) -> None:
    rows_all = np.flatnonzero(side)
    group = np.full(len(ph), 3, dtype=np.int8)  # 0 names, 1 flows, 2 counters, 3 instants
    for k in distinct(ph[rows_all]).tolist():
        text = strings[k] if k >= 0 else None
        g = 0 if text == "M" else 1 if text in ("s", "t", "f") else 2 if text == "C" else 3
        if g != 3:
            group[ph == k] = g

    def common(rows):
        return {
            "cat": cat[rows],
            "name": name[rows],
            "pid": pid[rows],
            "tid": tid[rows],
            "ts_ns": ts[rows],
            "index": base + rows,
            "ph": ph[rows],
        }

    def argcol(col: str, rows, default: int = -1):
        a = arg(_INDEX[col])
        return np.full(len(rows), default, dtype=np.int8) if a is None else a[rows]

    tables = {}
    for g, table in ((0, "names"), (1, "flows"), (3, "instants")):
        rows = rows_all[group[rows_all] == g]
        if not len(rows):
            continue
        cols = common(rows)
        if g == 0:
            for col in ("m_name", "m_labels", "m_sort_index"):
                cols[col] = argcol(col, rows)
        elif g == 1:
            cols["flow_id"] = np.frombuffer(r["id"], dtype=np.int64)[rows]
            cols["bp"] = ids("bp")[rows]
        else:
            cols["scope"] = ids("s")[rows]
            for col in (
                "mem_bytes",
                "mem_total_allocated",
                "mem_total_reserved",
                "mem_addr",
                "mem_device_type",
                "mem_device_id",
            ):
                cols[col] = argcol(col, rows)
        tables[table] = cols
    c_row = np.frombuffer(r["c_row"], dtype=np.int32)
    if len(c_row):
        sel = side[c_row]
        rows = c_row[sel].astype(np.int64)
        if len(rows):
            cols = common(rows)
            cols["series"] = np.frombuffer(r["c_key"], dtype=np.int32)[sel]
            cols["value"] = np.frombuffer(r["c_val"], dtype=np.float64)[sel]
            tables["counters"] = cols  # NaN samples stay (non_standard_json says the file has them)
    for table, cols in tables.items():
        out.tables[table] = {k: (v if k in _WIDE_COLUMNS else compact_ints(v)) for k, v in cols.items()}


def to_file(out: PieceOut, rmx: np.ndarray, base: int, used: Optional[IdsUsed] = None) -> None:
    """Renumber a piece's tables in place: string ids into the file's (``rmx``, last entry -1), rows from ``base``;
    ``used`` is told which file ids each id column holds."""
    n = int(rmx.max(initial=-1)) + 1  # (more than any file id of the piece)
    for table, cols in out.tables.items():
        id_cols = ID_COLUMNS[table]
        for k, v in cols.items():
            if k in id_cols:
                cols[k] = compact_ints(rmx[v]) if used is None else used.renumber(table, k, v, rmx, n)
            elif k == "index":
                cols[k] = v + base
