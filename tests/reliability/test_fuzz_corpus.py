"""Fuzzing the loader with mutated real traces: truncation, byte flips, numeric extremes, duplicated keys,
type swaps, gzip or not, with or without a BOM.

Every case must end as a typed error (``HolotraceError``, the CLI's exit 2) or a load whose findings account
for every dropped event: when Python's own JSON reader accepts the mutated text, events kept plus events
that findings say were left out equal the events with a duration in the text (fewer when a finding says the
event list was cut). No other exception (the CLI's exit 3), no case over its time limit, memory bounded.

Budget: ``examples(60)`` cases under the ``quick`` profile (CI), 20 times as many with
``HOLOTRACE_HYPOTHESIS_PROFILE=thorough``.
"""

from __future__ import annotations

import gzip
import json
import re
import resource
import signal
import time
from pathlib import Path

import pytest
from _profiles import examples
from hypothesis import given, settings
from hypothesis import strategies as st

import holotrace
from holotrace.errors import HolotraceError

DATA = Path(__file__).resolve().parents[1] / "data" / "traces"
CORPUS = [
    DATA / "hta_cpu_only" / "rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
    DATA / "hta_critical_path_cuda_event_sync" / "event_sync_trace.json.gz",
    DATA / "hta_amd_mi250" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz",
]
TEXTS = [gzip.decompress(p.read_bytes()) for p in CORPUS if p.exists()]
DROP_CODES = {"missing_time", "negative_duration", "bad_time", "bad_number"}
CUT_CODES = {"truncated_json", "truncated_gzip"}
EXTREMES = [
    b"NaN",
    b"Infinity",
    b"-Infinity",
    b"1e309",
    b"-1e309",
    b"18446744073709551616",
    b"1180591620717411303424",
    b"-1",
    b"-9223372036854775808",
    b"9.3e15",
    b"1e300",
    b"0",
    b"0.0000001",
    b'"5"',
    b"null",
    b"true",
    b"[]",
    b"{}",
    b'"\\u001b[31m"',
    b"4611686018427387904",
]
TIME_LIMIT_S = 20
_NUM = re.compile(rb"(?<=: )-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_STR = re.compile(rb'(?<=: )"[^"\\]{0,40}"')
_KEY = re.compile(rb'"(ts|dur|ph|name|cat|pid|tid)": ')

mutation = st.one_of(
    st.tuples(st.just("truncate"), st.floats(0, 1)),
    st.tuples(st.just("flip"), st.floats(0, 1), st.integers(1, 255)),
    st.tuples(st.just("extreme"), st.integers(0, 10**6), st.sampled_from(EXTREMES)),
    st.tuples(st.just("dup_key"), st.integers(0, 10**6), st.sampled_from(EXTREMES)),
    st.tuples(st.just("swap_type"), st.integers(0, 10**6), st.sampled_from([b"1", b"{}", b"[1]", b"null", b'"x"'])),
)


def _nth(pattern, text: bytes, k: int):
    found = list(pattern.finditer(text))
    return found[k % len(found)] if found else None


def mutate(text: bytes, m: tuple) -> bytes:
    kind = m[0]
    if kind == "truncate":
        return text[: int(len(text) * m[1])]
    if kind == "flip":
        if not text:
            return text
        i = min(len(text) - 1, int(len(text) * m[1]))
        return text[:i] + bytes([text[i] ^ m[2]]) + text[i + 1 :]
    if kind == "extreme":
        hit = _nth(_NUM, text, m[1])
        return text if hit is None else text[: hit.start()] + m[2] + text[hit.end() :]
    if kind == "dup_key":  # the same key again with another value, before the original
        hit = _nth(_KEY, text, m[1])
        return text if hit is None else text[: hit.start()] + hit.group(0) + m[2] + b", " + text[hit.start() :]
    hit = _nth(_STR if m[1] % 2 else _NUM, text, m[1] // 2)
    return text if hit is None else text[: hit.start()] + m[2] + text[hit.end() :]


def _expected_events(text: bytes):
    """Events with a duration as Python's JSON reader sees them, or None when it rejects the text."""
    try:
        doc = json.loads(text.decode("utf-8-sig"))
    except (ValueError, RecursionError):
        return None
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list) or text.count(b'"traceEvents"') > 1:
        return None
    return sum(1 for e in events if isinstance(e, dict) and (e.get("dur") is not None or e.get("ph") == "X"))


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout()


STATS = {"cases": 0, "errors": 0, "loads": 0, "checked": 0, "seconds": 0.0}


@pytest.mark.skipif(not TEXTS, reason="no bundled corpus")
@settings(max_examples=examples(60), deadline=None)
@given(which=st.integers(0, 2), muts=st.lists(mutation, min_size=1, max_size=3), gz=st.booleans(), bom=st.booleans())
def test_mutated_corpus_files(tmp_path_factory, which, muts, gz, bom):
    text = TEXTS[which % len(TEXTS)]
    for m in muts:
        text = mutate(text, m)
    if bom:
        text = b"\xef\xbb\xbf" + text
    folder = tmp_path_factory.mktemp("fuzz")
    f = folder / ("t.json.gz" if gz else "t.json")
    f.write_bytes(gzip.compress(text, 1) if gz else text)
    before_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(TIME_LIMIT_S)
    t0 = time.perf_counter()
    try:
        job = holotrace.load(f, cache=False, workers=1)
    except HolotraceError as e:
        msg = str(e)
        assert "\n" not in msg and str(f) in msg, msg
        job = None
    except _Timeout:
        pytest.fail(f"case ran over {TIME_LIMIT_S} s: {muts}")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    STATS["seconds"] += time.perf_counter() - t0
    STATS["cases"] += 1
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before_rss < 512 * 1024  # kB
    if job is None:
        STATS["errors"] += 1
        return
    STATS["loads"] += 1
    want = _expected_events(text)
    if want is None:
        return
    codes = {x.code.value for x in job.findings}
    kept = sum(job.rank(r).n_events for r in job.ranks)
    dropped = sum(x.count for x in job.findings if x.code.value in DROP_CODES and "other events" not in x.message)
    STATS["checked"] += 1
    if codes & CUT_CODES:
        assert kept + dropped <= want, (muts, kept, dropped, want)
    else:
        assert kept + dropped == want, (muts, kept, dropped, want, sorted(codes))


def test_fuzz_budget_report():
    """Runs after the fuzz test (file order): it did run cases, and says how many and how long."""
    if not TEXTS:
        pytest.skip("no bundled corpus")
    assert STATS["cases"] >= examples(60) // 2, STATS
    print(
        f"\nfuzz: {STATS['cases']} cases in {STATS['seconds']:.1f} s: {STATS['errors']} typed errors, "
        f"{STATS['loads']} loads ({STATS['checked']} with every event accounted for)"
    )
