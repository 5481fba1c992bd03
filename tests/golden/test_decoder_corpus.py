"""The columnar decoder gives the tables of the decoder it replaced, on every file of the corpus.

The msgspec-based decoder (``src/holotrace/ingest/decode.py`` at commit 2cc95e2) was run once on
every file under ``../shared/traces`` with ``all_args=True``; ``decoder_reference.json`` holds a
digest of everything it returned: every column of every table (string ids resolved to their
text, so that the two decoders' string tables may number strings differently; the dtypes of the other columns included),
the metadata, event and phase counts, ``ts_is_float``, the format, the raw args text and the
problems. ``digest`` below is the function that wrote it (regenerate with ``python
tests/golden/test_decoder_corpus.py OUT.json`` against that commit's decoder).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from holotrace.ingest.decode import decode_file
from holotrace.schema import ID_COLUMNS

REFERENCE = Path(__file__).with_name("decoder_reference.json")
TABLES = ("events", "instants", "counters", "flows", "names")


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()[:24]


def digest(d) -> dict:
    """A comparable summary of a decoded file (see the module docstring)."""
    out: dict = {
        "n_trace_events": d.n_trace_events,
        "phase_counts": dict(sorted(d.phase_counts.items())),
        "ts_is_float": bool(d.ts_is_float),
        "format": d.format,
        "meta": _sha(json.dumps(d.meta, sort_keys=True, default=str).encode()),
        "raw_args": _sha(json.dumps(d.raw_args).encode()),
        "problems": sorted([p.code, p.severity, p.count] for p in d.problems),
        "tables": {},
    }
    for t in TABLES:
        cols = {}
        for c, a in getattr(d, t).items():
            if c in ID_COLUMNS[t]:  # ids (and so their storage type) depend on the string table's numbering
                v = json.dumps([d.strings[i] if i >= 0 else None for i in a.tolist()]).encode()
                cols[c] = f"text:{len(a)}:{_sha(v)}"
            else:
                v = np.ascontiguousarray(a.astype(np.float64 if a.dtype.kind == "f" else np.int64)).tobytes()
                cols[c] = f"{a.dtype}:{len(a)}:{_sha(v)}"
        out["tables"][t] = cols
    return out


def corpus_files(root: Path) -> list[Path]:
    return [p for p in sorted(root.rglob("*")) if p.is_file() and p.name != "MANIFEST.md"]


def decode_or_error(path: Path) -> dict:
    try:
        return digest(decode_file(path, all_args=True))
    except Exception as e:  # the reference records which files cannot be decoded, and how
        return {"error": type(e).__name__}


# columns added after the reference was made: no file of the reference carries their keys (``Src Rank``,
# ``Dst Rank``), so each must hold its default (-1) on every row
NEWER_COLUMNS = {"events": ("p2p_src", "p2p_dst")}


def _all_default(digest_text: str, n_rows: int) -> bool:
    dtype, n, sha = digest_text.split(":")
    default = np.full(int(n), -1, dtype=np.int64).tobytes()
    return int(n) == n_rows and sha == _sha(default)


def _differences(want: dict, got: dict) -> list[str]:
    diffs = [k for k in set(want) | set(got) if k != "tables" and want.get(k) != got.get(k)]
    diffs += [t for t in set(got.get("tables", {})) - set(want.get("tables", {}))]
    for t, cols in want.get("tables", {}).items():
        g = dict(got.get("tables", {}).get(t, {}))
        rows = int(next(iter(cols.values())).split(":")[1]) if cols else 0
        for c in NEWER_COLUMNS.get(t, ()):
            if c not in cols and c in g and _all_default(g[c], rows):
                g.pop(c)
        diffs += [f"{t}.{c}" for c in set(cols) | set(g) if cols.get(c) != g.get(c)]
    return diffs


def test_every_corpus_file_decodes_to_the_reference_tables():
    from corpus import shared_or_skip

    traces = shared_or_skip() / "traces"
    reference = json.loads(REFERENCE.read_text())
    files = corpus_files(traces)
    names = {str(f.relative_to(traces)): f for f in files}
    assert set(reference) <= set(names), sorted(set(reference) - set(names))  # the corpus the reference was made on
    bad = {}
    for name, want in reference.items():
        f = names[name]
        got = decode_or_error(f)
        if "error" in want or "error" in got:
            if got != want:
                bad[name] = got
        elif _differences(want, got):
            bad[name] = _differences(want, got)
    assert not bad, bad
    assert sum(r.get("n_trace_events", 0) for r in reference.values()) > 1_000_000  # the comparison covered real data


def test_corpus_files_newer_than_the_reference_decode_every_event():
    """Files added to the corpus after the reference was made: no reference tables exist for them, so each
    must decode without error and count exactly the events that a plain JSON parse of the file finds."""
    import gzip

    from corpus import shared_or_skip

    traces = shared_or_skip() / "traces"
    reference = json.loads(REFERENCE.read_text())
    newer = [f for f in corpus_files(traces) if str(f.relative_to(traces)) not in reference]
    if not newer:
        pytest.skip("every corpus file is covered by the reference")
    for f in newer:
        opener = gzip.open if f.suffix == ".gz" else open
        with opener(f, "rb") as fh:
            doc = json.load(fh)
        events = doc["traceEvents"] if isinstance(doc, dict) else doc
        assert decode_file(f).n_trace_events == len(events), f.name


def test_a_changed_table_changes_the_digest(tmp_path):
    """The digest sees a one-row change in a column, and a string change behind an id."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tracebuilder import TraceBuilder

    tb = TraceBuilder(rank=0)
    tb.launch_kernel("gemm", 10, 5, 20, 30)
    d = decode_file(tb.write(tmp_path / "t.json"))
    a = digest(d)
    d.events["dur_ns"] = d.events["dur_ns"].copy()
    d.events["dur_ns"][0] += 1
    assert digest(d)["tables"]["events"]["dur_ns"] != a["tables"]["events"]["dur_ns"]
    d.strings[int(d.events["name"][0])] = "other"
    assert digest(d)["tables"]["events"]["name"] != a["tables"]["events"]["name"]


if __name__ == "__main__":  # write a reference from the decoder importable now
    root = Path(__file__).resolve().parents[2].parent / "shared" / "traces"
    ref = {str(f.relative_to(root)): decode_or_error(f) for f in corpus_files(root)}
    Path(sys.argv[1]).write_text(json.dumps(ref, indent=1, sort_keys=True) + "\n")
