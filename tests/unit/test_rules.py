"""The rule table as data: families, classification by the launching collective, user rules, the rules command."""

from __future__ import annotations

import re

import numpy as np
import pytest

import holotrace
from holotrace.analysis import classification
from holotrace.cli import main
from holotrace.errors import RulesError
from holotrace.model.classify import HTA, NATIVE, KernelType
from holotrace.model.rule_table import CommKind, default_table, hta_table, kind_of_collective_name, parse_rules
from holotrace.model.view import job_view
from tracebuilder import TraceBuilder

COMM = int(KernelType.COMMUNICATION)

# kernel names as the profiler records them (demangled templates), from the libraries' public sources
FAMILIES = [
    ("nccl", "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", CommKind.ALL_REDUCE),
    ("nccl", "ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", CommKind.ALL_GATHER),
    ("nccl", "ncclDevKernel_ReduceScatter_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", CommKind.REDUCE_SCATTER),
    ("nccl", "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", CommKind.SEND_RECV),
    ("nccl", "ncclDevKernel_Broadcast_RING_LL(ncclDevKernelArgsStorage<4096ul>)", CommKind.BROADCAST),
    ("rccl", "rcclGenericKernel<1, false>(ncclDevComm*, unsigned long, ncclWork*)", CommKind.UNKNOWN),
    ("peer-copy", "Memcpy PtoP (Device -> Device)", CommKind.PEER_COPY),
    ("deepep", "void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*, int*, long*)", CommKind.ALL_TO_ALL),
    ("deepep", "void dpsk::ep::internode::combine<__nv_bfloat16, 4, 8>(int4*, float*)", CommKind.ALL_TO_ALL),
    ("deepep", "void deep_ep::intranode::notify_dispatch<8>(int const*, int*, int)", CommKind.ALL_TO_ALL),
    ("deepep", "void deep_ep::layout::get_dispatch_layout<256, 32, 8>(long const*, int*, int*)", CommKind.ALL_TO_ALL),
    (
        "symm-mem",
        "void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*)",
        CommKind.ALL_REDUCE,
    ),
    (
        "symm-mem",
        "void c10d::symmetric_memory::two_shot_all_reduce_kernel<float, 8>(float**, unsigned long)",
        CommKind.ALL_REDUCE,
    ),
    (
        "vllm",
        "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::RankSignals)",
        CommKind.ALL_REDUCE,
    ),
    (
        "vllm",
        "void vllm::cross_device_reduce_2stage<float, 4>(vllm::RankData*, vllm::RankSignals)",
        CommKind.ALL_REDUCE,
    ),
    (
        "tensorrt-llm",
        "void tensorrt_llm::kernels::oneShotAllReduceKernel<__nv_bfloat16, 8>(AllReduceParams)",
        CommKind.ALL_REDUCE,
    ),
    (
        "tensorrt-llm",
        "void tensorrt_llm::kernels::twoShotAllReduceKernel<half, 4, false>(AllReduceParams)",
        CommKind.ALL_REDUCE,
    ),
    (
        "nvshmem",
        "void nvshmemi_reduce_kernel<float, (rdxn_ops)0>(int, int, int, float*, float const*)",
        CommKind.UNKNOWN,
    ),
    ("mscclpp", "void mscclpp::executionKernel<__nv_bfloat16>(int, __nv_bfloat16*, __nv_bfloat16*)", CommKind.UNKNOWN),
    (
        "userbuffers",
        "void userbuffers_fp16_sum_inplace_gpu_rr_rs<8>(int, int, int, int, int, int, void**)",
        CommKind.REDUCE_SCATTER,
    ),
    (
        "userbuffers",
        "void userbuffers_fp16_sum_inplace_gpu_rw_ag<4>(int, int, int, int, int, int, void**)",
        CommKind.ALL_GATHER,
    ),
    ("userbuffers", "void kuserbuffers_pushsend(int*, int*, int4*, int4*, int)", CommKind.SEND_RECV),
    (
        "ucc",
        "void UCC_REDUCE_CUDA_DEFAULT_SUM<float, float, false, 4>(ucc_eee_task_reduce_t, unsigned short)",
        CommKind.UNKNOWN,
    ),
]


def _load(tb: TraceBuilder, tmp_path, **kw):
    return holotrace.load(tb.write(tmp_path / "job"), cache=False, **kw)


def _row(view, rank: int, name: str) -> int:
    v = view[rank]
    return int(np.flatnonzero(view.names(v["name"]) == name)[0])


@pytest.mark.parametrize("family,name,kind", FAMILIES, ids=[f"{f}-{i}" for i, (f, _, _) in enumerate(FAMILIES)])
def test_each_family_is_communication_by_its_kernel_name(tmp_path, family, name, kind):
    tb = TraceBuilder(rank=0)
    tb.launch_kernel("void at::native::vectorized_elementwise_kernel<4>(int)", 0, 2, 10, 5)
    cat = "gpu_memcpy" if name.startswith("Memcpy") else "kernel"
    tb.launch_kernel(
        name, 20, 2, 30, 40, cat=cat, launch_name="cudaMemcpyAsync" if cat == "gpu_memcpy" else "cudaLaunchKernel"
    )
    view = job_view(_load(tb, tmp_path), NATIVE)
    v, i = view[0], _row(view, 0, name)
    assert v["kernel_type"][i] == COMM
    assert v["comm_kind"][i] == int(kind)
    assert view.table.rules[v["rule"][i]].family == family
    other = _row(view, 0, "void at::native::vectorized_elementwise_kernel<4>(int)")
    assert v["kernel_type"][other] == int(KernelType.COMPUTATION) and v["rule"][other] == -1
    assert v["comm_kind"][other] == -1


def test_symmetric_memory_kernel_under_vllm_all_reduce(tmp_path):
    """The B200 inference case: a symmetric-memory all-reduce under symm_mem:: under vllm::all_reduce."""
    tb = TraceBuilder(rank=0)
    tb.cpu_op("vllm::all_reduce", 100, 50)
    tb.cpu_op("symm_mem::multimem_all_reduce_", 105, 40)
    kname = "void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*, unsigned long)"
    tb.launch_kernel(kname, 110, 5, 120, 30)
    tb.launch_kernel("nvjet_sm100_tst_128x64_64x4_1x2_h_bz_TNT", 160, 5, 170, 60)  # after the ops: computation
    view = job_view(_load(tb, tmp_path), NATIVE)
    v = view[0]
    k = _row(view, 0, kname)
    assert v["kernel_type"][k] == COMM and v["comm_kind"][k] == int(CommKind.ALL_REDUCE)
    assert view.names(v["name"][[v["comm_op"][k]]])[0] == "symm_mem::multimem_all_reduce_"  # the innermost op
    gemm = _row(view, 0, "nvjet_sm100_tst_128x64_64x4_1x2_h_bz_TNT")
    assert v["kernel_type"][gemm] == int(KernelType.COMPUTATION) and v["comm_op"][gemm] == -1
    # both ops are CPU collectives
    for op in ("vllm::all_reduce", "symm_mem::multimem_all_reduce_"):
        assert v["comm_kind"][_row(view, 0, op)] == int(CommKind.ALL_REDUCE)


def test_kernel_matched_only_by_its_launching_operator(tmp_path):
    """A kernel no name rule knows, launched under c10d::allgather_ after a nested collective op that already
    ended: communication, kind from the enclosing op; the same kernel launched elsewhere, or on another thread
    during the op, stays computation."""
    tb = TraceBuilder(rank=0)
    tb.annotation("## forward ##", 0, 1000)
    tb.cpu_op("c10d::allgather_", 100, 200)
    tb.cpu_op("record_param_comms", 105, 20)  # ended before the launch: the search must look past it
    tb.launch_kernel("my_custom_gather_kernel", 150, 5, 400, 80)
    tb.launch_kernel("my_custom_gather_kernel", 500, 5, 600, 80)  # not under a collective
    tb.launch_kernel("my_custom_gather_kernel", 160, 5, 700, 80, tid=2)  # another thread
    job = _load(tb, tmp_path)
    view = job_view(job, NATIVE)
    v = view[0]
    rows = np.flatnonzero(view.names(v["name"]) == "my_custom_gather_kernel")
    assert v["kernel_type"][rows].tolist() == [COMM, int(KernelType.COMPUTATION), int(KernelType.COMPUTATION)]
    assert v["comm_kind"][rows].tolist() == [int(CommKind.ALL_GATHER), -1, -1]
    rule = view.table.rules[v["rule"][rows[0]]]
    assert (rule.on, rule.family) == ("op", "c10d")
    assert view.names(v["name"][[v["comm_op"][rows[0]]]])[0] == "c10d::allgather_"
    # HTA's rule set: by name only
    hv = job_view(job, HTA)[0]
    assert not (hv["kernel_type"][hv["gpu"]] == COMM).any()
    k = classification.kernel_rules(job)
    under = k[k["evidence"] == "launched under"]
    assert under[["name", "under", "count"]].values.tolist() == [["my_custom_gather_kernel", "c10d::allgather_", 1]]
    assert classification.unclaimed_share(k) == pytest.approx(100 * 160 / 240)


def test_record_param_comms_kind_from_its_args_and_name_kind_filled(tmp_path):
    tb = TraceBuilder(rank=0)
    tb.cpu_op(
        "record_param_comms", 10, 100, collective_name="_reduce_scatter_base", group_size=8, process_group_name="3"
    )
    tb.launch_kernel("ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)", 20, 5, 50, 30)
    tb.launch_kernel("Memcpy DtoD (Device -> Device)", 40, 5, 90, 3, cat="gpu_memcpy", launch_name="cudaMemcpyAsync")
    view = job_view(_load(tb, tmp_path), NATIVE)
    v = view[0]
    k = _row(view, 0, "ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)")
    assert v["kernel_type"][k] == COMM and v["comm_kind"][k] == int(CommKind.REDUCE_SCATTER)
    assert view.table.rules[v["rule"][k]].family == "hta"  # the name decided the type; the op gave the kind
    assert v.arg("group_size")[v["comm_op"][k]] == 8
    copy = _row(view, 0, "Memcpy DtoD (Device -> Device)")  # a memory rule, raised by the collective it serves
    assert v["kernel_type"][copy] == COMM and v["comm_kind"][copy] == int(CommKind.REDUCE_SCATTER)


def test_cpu_only_gloo_job(tmp_path):
    tb = TraceBuilder(rank=1, world_size=2, backend="gloo")
    tb.annotation("ProfilerStep#3", 0, 1000)
    tb.cpu_op("aten::mm", 10, 300)
    tb.cpu_op("c10d::allreduce_", 320, 400)
    tb.cpu_op("gloo:all_reduce", 330, 380)
    tb.cpu_op("gloo:broadcast", 800, 100)
    job = _load(tb, tmp_path)
    ops = classification.op_rules(job)
    got = {n: (k, t) for n, k, t in zip(ops["name"], ops["comm_kind"], ops["time_us"])}
    assert got == {
        "c10d::allreduce_": ("all_reduce", 400.0),
        "gloo:all_reduce": ("all_reduce", 380.0),
        "gloo:broadcast": ("broadcast", 100.0),
    }
    assert classification.kernel_rules(job).empty
    assert main(["rules", str(tmp_path / "job"), "--no-cache", "--quiet"]) == 0


def test_user_rules_add_and_override(tmp_path, monkeypatch):
    tb = TraceBuilder(rank=0)
    tb.launch_kernel("my_lib::ring_allreduce_kernel<float>", 0, 2, 10, 40)
    tb.launch_kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)", 20, 2, 60, 40)
    rules = tmp_path / "mine.rules"
    rules.write_text(
        "# my library\nkernel  mylib  communication  all_reduce  ^my_lib::ring_allreduce\n"
        "kernel  mine   computation    -           ^ncclDevKernel_AllReduce\n",
        encoding="utf-8",
    )
    path = tb.write(tmp_path / "job")
    for job in (holotrace.load(path, cache=False, rules=str(rules)),):
        view = job_view(job, NATIVE)
        v = view[0]
        mine = _row(view, 0, "my_lib::ring_allreduce_kernel<float>")
        assert v["kernel_type"][mine] == COMM and view.table.rules[v["rule"][mine]].label == "mylib (mine.rules:2)"
        nccl = _row(view, 0, "ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)")
        assert v["kernel_type"][nccl] == int(KernelType.COMPUTATION)  # overridden
        assert (job_view(job, HTA)[0]["kernel_type"] == COMM).sum() == 1  # HTA's rules ignore user rules
    monkeypatch.setenv("HOLOTRACE_RULES", str(rules))
    view = job_view(holotrace.load(path, cache=False), NATIVE)
    assert view.table.files == (str(rules),)
    assert view[0]["kernel_type"][_row(view, 0, "my_lib::ring_allreduce_kernel<float>")] == COMM


@pytest.mark.parametrize(
    "text,problem",
    [
        ("kernel mylib communication all_reduce\n", "line 1: expected 5 fields"),
        ("\n# ok\nkernal mylib communication all_reduce ^x\n", "line 3: unknown target 'kernal'"),
        ("kernel mylib compute - ^x\n", "line 1: unknown type 'compute'"),
        ("kernel mylib communication allreduce ^x\n", "line 1: unknown collective kind 'allreduce'"),
        ("op mylib memory - ^x\n", "line 1: an op rule's type must be communication"),
        ("kernel mylib communication - ^x(\n", "line 1: bad regular expression"),
    ],
)
def test_bad_rules_file_is_one_line_error_naming_file_and_line(tmp_path, capsys, text, problem):
    bad = tmp_path / "bad.rules"
    bad.write_text(text, encoding="utf-8")
    tb = TraceBuilder(rank=0)
    tb.launch_kernel("gemm", 0, 2, 10, 40)
    path = tb.write(tmp_path / "job")
    with pytest.raises(RulesError) as e:
        holotrace.load(path, cache=False, rules=str(bad))
    assert str(e.value).startswith(f"{bad}: {problem}") and "\n" not in str(e.value)
    assert main(["summary", str(path), "--no-cache", "--quiet", "--rules", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and problem in err[0] and str(bad) in err[0]


def test_missing_rules_file(tmp_path):
    with pytest.raises(RulesError, match="cannot read the rules file"):
        holotrace.load(tmp_path, rules=str(tmp_path / "absent.rules"))


def test_hta_rules_are_htas_regexes_matched_at_the_start():
    """The hta rules of the table classify as HTA 0.6.1's get_kernel_type (re.match of its three expressions)."""
    t = hta_table()
    assert [r.family for r in t.rules] == ["hta"] * 3
    cases = {
        "ncclKernel_x": "COMMUNICATION",
        "x_ncclKernel": "COMMUNICATION",
        "hipMemcpy": "COMMUNICATION",
        "Memcpy PtoP (Device -> Device)": "MEMORY",
        "rcclKernel": "COMPUTATION",
        "void foo_cudaLaunchKernel": "COMPUTATION",  # HTA's (cuda.*LaunchKernel) is matched at the start
        "cudaLaunchKernel": "OTHER",
        "my Memcpy": "OTHER",
        "vllm::cross_device_reduce_1stage": "COMPUTATION",
    }
    for name, want in cases.items():
        assert KernelType(t.kernel_rule(name)[0]).name == want, name


def test_default_is_at_least_hta_on_names():
    """Every name HTA calls communication is communication under the built-in table too."""
    names = ["ncclKernel_AllReduce", "hipExtLaunch", "hccl_allreduce", "void x<ncclKernel>", "nccl_anything"]
    for n in names:
        assert default_table().kernel_rule(n)[0] == COMM, n


def test_collective_name_arg_kinds():
    assert kind_of_collective_name("allreduce_coalesced") is CommKind.ALL_REDUCE
    assert kind_of_collective_name("_allgather_base") is CommKind.ALL_GATHER
    assert kind_of_collective_name("reduce_scatter_tensor_coalesced") is CommKind.REDUCE_SCATTER
    assert kind_of_collective_name("all_to_allv") is CommKind.ALL_TO_ALL
    assert kind_of_collective_name("recv") is CommKind.SEND_RECV
    assert kind_of_collective_name("reduce") is CommKind.REDUCE
    assert kind_of_collective_name("") is CommKind.UNKNOWN


def test_every_built_in_rule_parses_and_names_its_line():
    t = default_table()
    assert t.rules and all(r.line > 0 and r.source.endswith("default.rules") for r in t.rules)
    assert parse_rules("kernel a communication - x\n\n# c\nop b communication args ^y$\n", "u")[1].line == 4


def test_rules_command_flags_large_unclaimed_kernels(tmp_path, capsys):
    import json

    tb = TraceBuilder(rank=0)
    tb.launch_kernel("mystery_collective_kernel", 0, 2, 10, 90)  # 90 us of 100: no rule claims it
    tb.launch_kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)", 20, 2, 100, 10)
    path = tb.write(tmp_path / "job")
    assert main(["rules", str(path), "--no-cache", "--quiet", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["meta"]["unclaimed_share"] == pytest.approx(90.0)
    assert doc["meta"]["communication_share"] == pytest.approx(10.0)
    rows = {r["name"]: r for r in doc["kernels"]}
    assert rows["mystery_collective_kernel"]["evidence"] == "no rule"
    assert rows["ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)"]["rule"].startswith("nccl (default.rules:")
    assert main(["rules", str(path), "--no-cache", "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "Kernels no rule claimed" in text and "mystery_collective_kernel" in text.split("Kernels no rule claimed")[1]
    mine = tmp_path / "mine.rules"
    mine.write_text("kernel  mystery  communication  all_to_all  ^mystery_collective\n", encoding="utf-8")
    assert main(["rules", str(path), "--no-cache", "--quiet", "--format", "json", "--rules", str(mine)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["meta"]["unclaimed_share"] == 0.0 and doc["meta"]["user_rules"] == [str(mine)]


def test_critical_path_sees_a_kernel_classified_by_its_launching_operator(tmp_path):
    """A custom all-reduce kernel no name rule knows, launched under vllm::all_reduce and waited for by a device
    synchronize: on the critical path it is communication-bound under holotrace's rules, compute-bound under
    HTA's (name only)."""
    from holotrace.analysis.critical_path import breakdown, critical_path

    tb = TraceBuilder(rank=0)
    tb.annotation("ProfilerStep#1", 0, 1000)
    tb.cpu_op("vllm::all_reduce", 10, 30)
    tb.launch_kernel("my_allreduce_kernel<float>", 15, 5, 50, 800)
    tb.runtime("cudaDeviceSynchronize", 45, 820)
    job = _load(tb, tmp_path)
    for rules, want in ((NATIVE, "gpu_communication_bound"), (HTA, "gpu_compute_bound")):
        b = breakdown(critical_path(job, rank=0, rules=rules))
        kernel_edges = b[b["s_name"].astype(str).str.startswith("my_allreduce_kernel")]
        assert len(kernel_edges) and set(kernel_edges["bound_by"]) == {want}, rules.name


def test_user_rules_reach_every_summary_path(tmp_path, capsys):
    """--rules on the summary of a loaded job, of a map on the local executor, and of an ingest folder."""
    import json

    for r in (0, 1):
        tb = TraceBuilder(rank=r, world_size=2)
        tb.launch_kernel("gemm_kernel", 0, 2, 10, 60)
        tb.launch_kernel("my_lib_ring_allreduce<float>", 20, 2, 80, 40)
        tb.write(tmp_path / "job")
    mine = tmp_path / "mine.rules"
    mine.write_text("kernel  mylib  communication  all_reduce  ^my_lib_ring_allreduce\n", encoding="utf-8")

    def comm_share(argv) -> float:
        assert main(argv + ["--format", "json"]) == 0
        types = json.loads(capsys.readouterr().out)["kernel_types"]
        return sum(t["pctg"] for t in types if "COMMUNICATION" in t["kernel_type"])

    job = str(tmp_path / "job")
    assert comm_share(["summary", job, "--no-cache", "--quiet"]) == 0
    assert comm_share(["summary", job, "--no-cache", "--quiet", "--rules", str(mine)]) > 0
    assert comm_share(["summary", job, "--no-cache", "--quiet", "--executor", "local", "--rules", str(mine)]) > 0
    assert main(["ingest", job, "--output", str(tmp_path / "ing"), "--quiet", "--rules", str(mine)]) == 0
    capsys.readouterr()
    assert comm_share(["summary", str(tmp_path / "ing"), "--quiet"]) > 0
    bad = tmp_path / "bad.rules"
    bad.write_text("kernel mylib communication nope ^x\n", encoding="utf-8")
    assert main(["ingest", job, "--output", str(tmp_path / "ing2"), "--quiet", "--rules", str(bad)]) == 2
    assert "bad.rules: line 1: unknown collective kind" in capsys.readouterr().err


def test_built_in_rules_are_read_as_a_users_file_would_be():
    """The built-in file is read without compiling each pattern up front: read as a user's file (every pattern
    compiled, a bad one an error naming its line), it gives the same rules."""
    from holotrace.model.rule_table import DEFAULT_RULES_FILE

    checked = parse_rules(DEFAULT_RULES_FILE.read_text(encoding="utf-8"), str(DEFAULT_RULES_FILE))
    assert len(checked) > 20 and list(default_table().rules) == checked
    from holotrace.model.rule_table import anchored_once

    assert all(r.pattern.pattern == anchored_once(r.regex) for r in checked)


@pytest.mark.parametrize(
    "regex,once",
    [
        ("(^nccl)|(^.*Memcpy)", "^(?:(nccl)|(.*Memcpy))"),
        ("(^(hip)?Memcpy)|(^(hip)?Memset)|(^dma)", "^(?:((hip)?Memcpy)|((hip)?Memset)|(dma))"),
        ("(^a[)|]b)|(^c\\|)", "^(?:(a[)|]b)|(c\\|))"),
        ("(^a|b)|(^c)", None),  # an alternative inside a group that is not anchored
        ("(^a)|b", None),
        ("(^a)(x)|(^b)", None),  # an alternative of more than one group
        ("(^a)?|(^b)", None),
        ("(?i)(^a)|(^b)", None),
        ("^abc", None),
        ("(^a)", None),
        ("nccl(Dev)?Kernel_AllReduce", None),
    ],
)
def test_anchored_once_rewrites_only_alternatives_that_are_each_one_anchored_group(regex, once):
    from holotrace.model.rule_table import anchored_once

    assert anchored_once(regex) == (regex if once is None else once)


def test_anchored_once_matches_the_same_names():
    """HTA's rules written as one anchor before all alternatives find the same names as written: long kernel names,
    the start and the middle of a name, and names that match nowhere."""
    from holotrace.model.rule_table import anchored_once, default_table

    names = [
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>> " * 3,
        "Memcpy HtoD (Pinned -> Device)",
        "hipMemsetAsync",
        "xx cudaStreamSynchronize",
        "cudaLaunchKernel",
        "dma_copy",
        "Stream Wait Event",
        "my_dma_kernel",
        "",
    ]
    changed = [r.regex for r in default_table().rules if anchored_once(r.regex) != r.regex]
    assert len(changed) >= 3
    for regex in changed:
        a, b = re.compile(regex), re.compile(anchored_once(regex))
        assert [bool(a.search(n)) for n in names] == [bool(b.search(n)) for n in names], regex
        assert a.groups == b.groups


def test_the_facades_kernel_patterns_are_written_as_hta_writes_them():
    """The facade's grouping patterns show HTA's expressions as written (the anchored form is the table's own way of
    matching, not what the facade hands out)."""
    from holotrace.compat.types import ComputeKernelGroupingPattern, MemoryKernelGroupingPattern

    assert MemoryKernelGroupingPattern.pattern.pattern == r"(^(hip)?Memcpy)|(^(hip)?Memset)|(^dma)"
    assert ComputeKernelGroupingPattern.pattern.pattern.startswith(r"(^nccl)|(^.*Memcpy)|(^.*Memset)|")
    assert MemoryKernelGroupingPattern.pattern.match(
        "hipMemcpyAsync"
    ) and not MemoryKernelGroupingPattern.pattern.match("xMemcpy")
