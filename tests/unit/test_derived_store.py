"""What commands derive from a cached rank (the rules' columns, the job graph's nodes), kept beside its cache entry
and mapped by later loads."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

import holotrace
from holotrace.cli import main
from holotrace.ingest import cache as cache_mod
from holotrace.ingest.derived import MAGIC, EntryStore, is_derived_file
from holotrace.model import view as view_mod
from holotrace.model.classify import NATIVE, KernelType
from holotrace.model.filter import TraceFilter, filter_job
from holotrace.model.view import job_view
from tracebuilder import TraceBuilder

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "hta_trace_filter_2rank"
RULES = ("kernel_type", "comm_kind", "rule", "comm_op")


def _load(cache: Path, **kw):
    job = holotrace.load(str(EXAMPLE), cache_dir=str(cache), **kw)
    cache_mod.flush()  # (entries and derived files are written on threads)
    return job


def _rules_columns(job) -> dict:
    view = job_view(job, NATIVE)
    out = {r: {k: np.array(view[r][k]) for k in RULES} for r in view.ranks}
    cache_mod.flush()
    return out


def _made_here(job) -> dict:
    """The rules' columns made now from the job's model columns, whatever is kept."""
    for t in job.traces.values():
        t.derived_store = None
    job.forget_views()
    return _rules_columns(job)


def _no_classifying(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("classified again")

    monkeypatch.setattr(view_mod, "classify_rank", refuse)


def test_a_cached_rank_keeps_its_rules_columns_and_later_loads_map_them(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    first = _load(cache)  # a first load: the entries are written, the columns made here
    assert all(t.derived_store is None for t in first.traces.values())
    made = _rules_columns(first)
    assert not list(cache.glob("*/derived-*.bin"))
    hit = _load(cache)  # mapped from the entries: the rules' columns made once more, and kept
    assert all(isinstance(t.derived_store, EntryStore) for t in hit.traces.values())
    assert _rules_columns(hit).keys() == made.keys()
    kept = sorted(cache.glob("*/derived-rules-*.bin"))
    assert len(kept) == len(hit.ranks) == 2 and all(is_derived_file(p.name) for p in kept)
    _no_classifying(monkeypatch)
    again = _load(cache)
    got = _rules_columns(again)
    for r in made:
        for k in RULES:
            assert got[r][k].dtype == made[r][k].dtype and np.array_equal(got[r][k], made[r][k]), (r, k)
    assert (got[0]["kernel_type"] == int(KernelType.COMMUNICATION)).any()  # (the example has collectives)


def test_the_summary_is_the_same_from_kept_columns(tmp_path, capsys):
    args = ["summary", str(EXAMPLE), "--cache-dir", str(tmp_path / "cache")]
    outs = []
    for _ in range(3):  # decoded, mapped (the rules' columns and the graph's nodes kept), mapped with them
        assert main(args) == 0
        cache_mod.flush()
        outs.append(capsys.readouterr().out)
    assert len(list((tmp_path / "cache").glob("*/derived-rules-*.bin"))) == 2
    assert len(list((tmp_path / "cache").glob("*/derived-graph_nodes-*.bin"))) == 2  # (the summary's job replay)
    assert outs[0] == outs[1] == outs[2]


def _header(path: Path) -> tuple[dict, int]:
    raw = path.read_bytes()
    (k,) = struct.unpack_from("<I", raw, len(MAGIC))
    return json.loads(raw[len(MAGIC) + 4 : len(MAGIC) + 4 + k]), k


def _rewrite_header(path: Path, change) -> None:
    raw = bytearray(path.read_bytes())
    head, k = _header(path)
    change(head)
    text = json.dumps(head).encode("utf-8")
    assert len(text) <= head["data"][0] - len(MAGIC) - 4  # (fits where the old one was)
    raw[len(MAGIC) : head["data"][0]] = (struct.pack("<I", len(text)) + text).ljust(head["data"][0] - len(MAGIC), b"\0")
    path.write_bytes(bytes(raw))


@pytest.mark.parametrize("damage", ["token", "events", "data_other_boot", "truncated", "not_ours"])
def test_a_damaged_or_foreign_derived_file_is_a_miss(tmp_path, damage):
    cache = tmp_path / "cache"
    _load(cache)
    made = _rules_columns(_load(cache))  # (kept now)
    path = sorted(cache.glob("*/derived-rules-*.bin"))[0]
    if damage == "token":
        _rewrite_header(path, lambda h: h.update(token="00" * 16))
    elif damage == "events":
        _rewrite_header(path, lambda h: h.update(n=h["n"] + 1))
    elif damage == "data_other_boot":  # written before this boot: its CRC-32 is checked
        _rewrite_header(path, lambda h: h.update(boot="another boot"))
        raw = bytearray(path.read_bytes())
        raw[-1] ^= 0xFF
        path.write_bytes(bytes(raw))
    elif damage == "truncated":
        path.write_bytes(path.read_bytes()[:-8])
    else:
        path.write_bytes(b"something else entirely")
    job = _load(cache)
    store = next(t.derived_store for t in job.traces.values() if t.derived_store.folder == path.parent)
    assert store.get(path.name[len("derived-") : -len(".bin")], RULES) is None
    got = _rules_columns(job)  # made again: the same values
    for r in made:
        for k in RULES:
            assert np.array_equal(got[r][k], made[r][k])


def test_other_rules_are_kept_apart(tmp_path):
    tb = TraceBuilder(rank=0)
    tb.launch_kernel("my_lib::ring_allreduce_kernel<float>", 0, 2, 10, 40)
    tb.launch_kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)", 20, 2, 60, 40)
    path = tb.write(tmp_path / "job")
    rules = tmp_path / "mine.rules"
    rules.write_text("kernel  mylib  communication  all_reduce  ^my_lib::ring_allreduce\n", encoding="utf-8")
    cache = tmp_path / "cache"
    holotrace.load(path, cache_dir=str(cache))
    cache_mod.flush()
    types = {}
    for i, kw in enumerate(({}, {"rules": str(rules)}, {}, {"rules": str(rules)})):
        job = holotrace.load(path, cache_dir=str(cache), **kw)
        v = job_view(job, NATIVE)[0]
        mine = int(np.flatnonzero(np.array(job.strings.decode(v["name"])) == "my_lib::ring_allreduce_kernel<float>")[0])
        types.setdefault(bool(kw), set()).add(int(v["kernel_type"][mine]))
        cache_mod.flush()
        assert len(list(cache.glob("*/derived-rules-*.bin"))) == min(i + 1, 2)
    assert types == {False: {int(KernelType.COMPUTATION)}, True: {int(KernelType.COMMUNICATION)}}


def test_a_job_of_chosen_rows_and_an_uncached_load_keep_nothing(tmp_path):
    cache = tmp_path / "cache"
    _load(cache)
    job = _load(cache)
    same = filter_job(job, TraceFilter(ranks=(0,)))  # (the rank's own columns, whole: what is kept is theirs)
    assert same.traces[0] is job.traces[0] and same.traces[0].derived_store is not None
    kept = filter_job(job, TraceFilter(ranks=(0,), time_range_us=(0, 10**15)))  # rows chosen: new columns
    assert all(t.derived_store is None for t in kept.traces.values())
    assert all(t.derived_store is None for t in holotrace.load(str(EXAMPLE), cache=False).traces.values())
    assert _made_here(job).keys() == {0, 1}


def test_cache_status_and_clear_count_entries_with_derived_files(tmp_path):
    cache = tmp_path / "cache"
    _load(cache)
    _rules_columns(_load(cache))
    st = cache_mod.status(cache)
    assert st["entries"] == 2 and st["other"] == 0
    with_derived = sum(p.stat().st_size for p in cache.glob("*/*"))
    assert st["bytes"] == with_derived
    n, size = cache_mod.clear(cache)
    assert (n, size) == (2, with_derived) and not list(cache.iterdir())


def test_a_store_is_only_made_for_columns_mapped_from_an_entry(tmp_path):
    token = b"\x01" * 16
    assert EntryStore.of((str(tmp_path / ("a" * 24) / "columns.bin"), {}, token), 5) is not None
    assert EntryStore.of((str(tmp_path / ".tmp-host-1-x" / "columns.bin"), {}, token), 5) is None
    assert EntryStore.of(None, 5) is None
    store = EntryStore(tmp_path, token, 5)
    assert store.get("../escape", ()) is None  # (a name that is not a derived file's is never opened)
    with pytest.raises(ValueError):
        store.put("../escape", {"a": np.zeros(5, dtype=np.int8)})


def _graph_arrays(job) -> dict:
    from holotrace.analysis.critical_path.job_graph import build_job_graph

    g = build_job_graph(job_view(job, NATIVE))
    cache_mod.flush()
    return {k: np.array(a) for k, a in vars(g).items() if isinstance(a, np.ndarray)}


def test_the_job_graph_from_kept_nodes_is_the_graph_made_anew(tmp_path, monkeypatch):
    from holotrace.analysis.critical_path import job_graph

    cache = tmp_path / "cache"
    made = _graph_arrays(_load(cache))  # (a first load: nothing kept)
    _graph_arrays(_load(cache))  # mapped from the entries: the nodes made, and kept
    assert len(list(cache.glob("*/derived-graph_nodes-*.bin"))) == 2

    def refuse(*a, **k):
        raise AssertionError("nodes made again")

    monkeypatch.setattr(job_graph, "_made_rank_nodes", refuse)
    got = _graph_arrays(_load(cache))
    assert got.keys() == made.keys() and len(made["point_time"])
    for k in made:
        assert got[k].dtype == made[k].dtype and np.array_equal(got[k], made[k]), k


def test_doctor_verify_removes_a_damaged_derived_file(tmp_path, capsys):
    cache = tmp_path / "cache"
    _load(cache)
    made = _rules_columns(_load(cache))
    path = sorted(cache.glob("*/derived-rules-*.bin"))[0]
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0xFF  # (damage this boot's load would serve: only a whole read finds it)
    path.write_bytes(bytes(raw))
    assert main(["doctor", str(EXAMPLE), "--cache-dir", str(cache), "--verify"]) == 1  # (the example's missing ranks)
    assert "1 damaged derived file(s) removed" in capsys.readouterr().out
    assert not path.exists() and len(list(cache.glob("*/derived-*.bin"))) >= 1  # (the others kept)
    got = _rules_columns(_load(cache))
    for r in made:
        for k in RULES:
            assert np.array_equal(got[r][k], made[r][k])


def test_an_entry_keeps_the_newest_few_files_of_a_kind(tmp_path):
    import os

    from holotrace.ingest import derived

    cache = tmp_path / "cache"
    _load(cache)
    job = _load(cache)
    store = job.traces[0].derived_store
    cols = {"a": np.arange(5, dtype=np.int32)}
    names = [f"rules-{i:024x}" for i in range(derived.KEEP_PER_KIND + 2)]
    for k, name in enumerate(names):
        store.put(name, cols)
        cache_mod.flush()
        path = store.folder / f"derived-{name}.bin"
        os.utime(path, ns=(10**18 + k, 10**18 + k))  # (ordered whatever the file system's clock resolution)
    kept = sorted(p.name for p in store.folder.glob("derived-rules-*.bin"))
    assert kept == sorted(f"derived-{n}.bin" for n in names[-derived.KEEP_PER_KIND :])
    assert np.array_equal(store.get(names[-1], ("a",))["a"], cols["a"]) and store.get(names[0], ("a",)) is None


def test_changed_maker_code_makes_its_own_file(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    _load(cache)
    made = _rules_columns(_load(cache))
    before = sorted(p.name for p in cache.glob("*/derived-rules-*.bin"))
    monkeypatch.setattr(view_mod, "_rules_code", lambda: "0123456789ab")  # (as if the classifier's code changed)
    got = _rules_columns(_load(cache))  # (made again, not mapped from what the other code made)
    after = sorted(p.name for p in cache.glob("*/derived-rules-*.bin"))
    assert len(after) == 2 * len(before) and all(n in after for n in before)
    assert sum("0123456789ab" in n for n in after) == len(before)
    for r in made:
        for k in RULES:
            assert np.array_equal(got[r][k], made[r][k])
