#!/usr/bin/env python3
"""Generate large, realistic PyTorch Profiler (Kineto) traces for benchmarks.

The generated job imitates a data-parallel (DDP) training run of a small
transformer under bf16 autocast on H100s, one trace file per rank, in the text
layout Kineto itself writes (one event per block of lines, 2-space indent):

* ``ProfilerStep#N`` spans, a data-loader annotation, ``DistributedDataParallel.forward``,
  ``## backward ##`` and ``Optimizer.step#AdamW.step`` annotations (CPU and GPU side);
* nested ``cpu_op`` stacks on the main thread (forward, optimizer) and on the
  autograd thread (backward nodes with ``Sequence number`` / ``Fwd thread id``);
* ``cuda_runtime`` launches (``cudaLaunchKernel``, ``cudaLaunchKernelExC``,
  ``cudaMemcpyAsync``, ``cudaMemsetAsync``, ``cudaStreamWaitEvent``,
  ``cudaStreamSynchronize`` ...) linked to ``kernel`` / ``gpu_memcpy`` /
  ``gpu_memset`` events by ``correlation`` and ``ac2g`` flows;
* compute on stream 7, NCCL on stream 20: one all-gather after the forward pass
  (``ncclKernel_AllGather_...``, old NCCL naming) and one all-reduce per block in
  the backward pass (``ncclDevKernel_AllReduce_...``, NCCL >= 2.19 naming), with
  ``record_param_comms`` ops carrying the collective arguments.

Collectives are synchronised across ranks without simulating the ranks together:
each rank's GPU speed in a step is a factor drawn from (seed, rank, step), so a
rank can work out when the slowest rank reaches each collective; the collective
ends at the same time on every rank (the others wait), which is what makes a
straggler (``--straggler-rank``) visible as short collectives on the slow rank
and long ones elsewhere.

Output is deterministic for a given seed and options, written as a stream (only
the events of one top-level operator are held at a time), and every rank is
generated independently, so ranks are generated in parallel processes.

Example::

    python benchmarks/generate.py --out jobs/job --ranks 8 --target-mb 60
    python benchmarks/generate.py --out jobs/one --ranks 1 --world-size 8 --target-mb 500 --gzip

Sizes are in MB of 10**6 bytes of uncompressed JSON per rank (approximate: the
number of transformer blocks is chosen to reach the target for the given number
of steps).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import sys
import time
from concurrent.futures import ProcessPoolExecutor

# Streams and CUDA runtime callback ids (values as in real CUDA 12 traces).
COMPUTE, COMM = 7, 20
CBID = {
    "cudaLaunchKernel": 211,
    "cudaLaunchKernelExC": 430,
    "cudaMemcpyAsync": 41,
    "cudaMemsetAsync": 51,
    "cudaStreamSynchronize": 131,
    "cudaEventRecord": 135,
    "cudaStreamWaitEvent": 147,
    "cudaStreamIsCapturing": 317,
}

# Model shape (only used to make argument values plausible).
BATCH, SEQ, HIDDEN, FFN, HEADS, VOCAB = 8, 1024, 1024, 4096, 16, 32000
TOKENS = BATCH * SEQ
BLOCK_PARAMS = 4 * HIDDEN * HIDDEN + 2 * HIDDEN * FFN + 13 * HIDDEN
BUS_BYTES_PER_US = 100e3  # 100 GB/s NCCL bus bandwidth

FIRST_STEP = 5  # profiler schedules usually skip a few steps
VERSION = 2  # bump when the output changes, so cached benchmark jobs are regenerated


class Kernel:
    """A GPU kernel: name, nominal duration (us) and the launch-config args Kineto records."""

    __slots__ = ("name", "dur_ns", "tail")

    def __init__(self, name, dur_us, grid, block, regs, smem):
        self.name = name
        self.dur_ns = int(dur_us * 1000)
        threads = block[0] * block[1] * block[2]
        blocks_per_sm = grid[0] * grid[1] * grid[2] / 132
        warps_per_sm = blocks_per_sm * max(1, threads // 32)
        occupancy = min(100, int(warps_per_sm / 64 * 100))
        self.tail = (
            f'"registers per thread": {regs},      "shared memory": {smem},      '
            f'"blocks per SM": {blocks_per_sm:.6f},      "warps per SM": {warps_per_sm:.6f},      '
            f'"grid": [{grid[0]}, {grid[1]}, {grid[2]}],      "block": [{block[0]}, {block[1]}, {block[2]}],      '
            f'"est. achieved occupancy %": {occupancy}'
        )


def _elementwise(functor, arrays=3):
    return (
        f"void at::native::vectorized_elementwise_kernel<4, {functor}, std::array<char*, {arrays}ul> >"
        f"(int, {functor}, std::array<char*, {arrays}ul>)"
    )


K = {
    "cast": Kernel(
        _elementwise("at::native::bfloat16_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda(float)#1}", 2),
        6,
        (4096, 1, 1),
        (128, 1, 1),
        16,
        0,
    ),
    "gemm_qkv": Kernel(
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
        140,
        (24, 64, 1),
        (128, 1, 1),
        168,
        213248,
    ),
    "gemm_proj": Kernel(
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
        50,
        (16, 128, 1),
        (128, 1, 1),
        90,
        114688,
    ),
    "gemm_fc": Kernel(
        "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_256x128_64x3_tn_align8>(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_256x128_64x3_tn_align8::Params)",
        190,
        (16, 64, 2),
        (256, 1, 1),
        230,
        147456,
    ),
    "splitk": Kernel(
        "void cublasLt::splitKreduce_kernel<32, 16, int, float, __nv_bfloat16, float, __nv_bfloat16, true, false, false>(cublasLt::cublasSplitKParams<float>, float const*, __nv_bfloat16 const*, __nv_bfloat16*, float const*, float const*, __nv_bfloat16 const*, float const*, __nv_bfloat16*, void*, long, float*, int*, float*, float const*, float const*, float const*, float const*)",
        9,
        (1024, 1, 1),
        (256, 1, 1),
        40,
        0,
    ),
    "gemm_lm": Kernel(
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas",
        1300,
        (125, 64, 1),
        (384, 1, 1),
        168,
        229376,
    ),
    "ln": Kernel(
        "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, float, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)",
        12,
        (TOKENS, 1, 1),
        (256, 1, 1),
        32,
        0,
    ),
    "ln_bwd_in": Kernel(
        "void at::native::(anonymous namespace)::layer_norm_grad_input_kernel_vectorized<c10::BFloat16, float>(c10::BFloat16 const*, c10::BFloat16 const*, float const*, float const*, c10::BFloat16 const*, c10::BFloat16*, int)",
        18,
        (TOKENS, 1, 1),
        (128, 1, 1),
        40,
        0,
    ),
    "ln_bwd_gamma": Kernel(
        "void at::native::(anonymous namespace)::GammaBetaBackwardCUDAKernel_32x32<c10::BFloat16, float>(long, long, c10::BFloat16 const*, c10::BFloat16 const*, float const*, float const*, c10::BFloat16*, c10::BFloat16*)",
        14,
        (32, 1, 1),
        (32, 32, 1),
        64,
        8448,
    ),
    "flash_fwd": Kernel(
        "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<64, 128, 128, 4, cutlass::bfloat16_t> >, false, true, false, false, false, true, false>(pytorch_flash::Flash_fwd_params)",
        160,
        (8, BATCH, HEADS),
        (128, 1, 1),
        255,
        49152,
    ),
    "flash_bwd": Kernel(
        "void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<pytorch_flash::Flash_bwd_kernel_traits<64, 128, 128, 8, 2, 4, 2, false, false, cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<64, 128, 128, 8, cutlass::bfloat16_t> >, false, true, false, false, false, false>(pytorch_flash::Flash_bwd_params)",
        420,
        (8, BATCH, HEADS),
        (256, 1, 1),
        255,
        98304,
    ),
    "flash_bwd_dq": Kernel(
        "void pytorch_flash::flash_bwd_convert_dq_kernel<pytorch_flash::Flash_bwd_kernel_traits<64, 128, 128, 8, 2, 4, 2, false, false, cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<64, 128, 128, 8, cutlass::bfloat16_t> >, false, false>(pytorch_flash::Flash_bwd_params, int)",
        15,
        (8, BATCH, HEADS),
        (256, 1, 1),
        64,
        24576,
    ),
    "add": Kernel(_elementwise("at::native::CUDAFunctor_add<c10::BFloat16>"), 14, (8192, 1, 1), (128, 1, 1), 28, 0),
    "add_": Kernel(_elementwise("at::native::CUDAFunctorOnSelf_add<float>", 2), 8, (4096, 1, 1), (128, 1, 1), 24, 0),
    "gelu": Kernel(
        _elementwise(
            "at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}",
            2,
        ),
        25,
        (32768, 1, 1),
        (128, 1, 1),
        30,
        0,
    ),
    "gelu_bwd": Kernel(
        _elementwise(
            "at::native::GeluBackwardCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16, c10::BFloat16)#1}"
        ),
        38,
        (32768, 1, 1),
        (128, 1, 1),
        32,
        0,
    ),
    "bias_grad": Kernel(
        "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<c10::BFloat16, at::native::func_wrapper_t<float, at::native::sum_functor<c10::BFloat16, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, c10::BFloat16, 4> >(at::native::ReduceOp<c10::BFloat16, at::native::func_wrapper_t<float, at::native::sum_functor<c10::BFloat16, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, c10::BFloat16, 4>)",
        16,
        (256, 1, 1),
        (32, 16, 1),
        40,
        16,
    ),
    "embed": Kernel(
        "void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::BFloat16, long, unsigned int, 2, 2, -2, true>(at::cuda::detail::TensorInfo<c10::BFloat16, unsigned int>, at::cuda::detail::TensorInfo<c10::BFloat16 const, unsigned int>, at::cuda::detail::TensorInfo<long const, unsigned int>, int, int, unsigned int, unsigned int, long)",
        30,
        (8192, 1, 1),
        (128, 1, 1),
        32,
        0,
    ),
    "embed_bwd": Kernel(
        "void at::native::(anonymous namespace)::embedding_backward_feature_kernel<c10::BFloat16, float, long>(long const*, c10::BFloat16 const*, c10::BFloat16*, int, long, int, int)",
        210,
        (32, 1, 1),
        (32, 32, 1),
        48,
        8192,
    ),
    "log_softmax": Kernel(
        "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, at::native::(anonymous namespace)::LogSoftMaxForwardEpilogue>(float*, float const*, int)",
        240,
        (TOKENS, 1, 1),
        (1024, 1, 1),
        38,
        0,
    ),
    "nll": Kernel(
        "void at::native::(anonymous namespace)::nll_loss_forward_reduce_cuda_kernel_2d<float, float, long>(float*, float*, float const*, long const*, float const*, bool, long, long, long, long)",
        22,
        (1, 1, 1),
        (1024, 1, 1),
        28,
        0,
    ),
    "nll_bwd": Kernel(
        "void at::native::(anonymous namespace)::nll_loss_backward_reduce_cuda_kernel_2d<float, long>(float*, float const*, long const*, float const*, float const*, bool, int, int, long, long)",
        10,
        (1, 1, 1),
        (1024, 1, 1),
        28,
        0,
    ),
    "log_softmax_bwd": Kernel(
        "void at::native::(anonymous namespace)::cunn_SoftMaxBackward<4, float, float, float, at::native::(anonymous namespace)::LogSoftMaxBackwardEpilogue>(float*, float const*, float const*, int)",
        260,
        (TOKENS, 1, 1),
        (1024, 1, 1),
        40,
        0,
    ),
    "fill": Kernel(_elementwise("at::native::FillFunctor<float>", 1), 2, (1, 1, 1), (64, 1, 1), 16, 0),
    "adam": Kernel(
        "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, double*, double, double, double, double, double, bool, float*, float*>(at::native::(anonymous namespace)::TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, double*, double, double, double, double, double, bool, float*, float*)",
        70,
        (1320, 1, 1),
        (512, 1, 1),
        64,
        0,
    ),
    "allreduce": Kernel(
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 0, (24, 1, 1), (640, 1, 1), 96, 0
    ),
    "allgather": Kernel("ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclWork*)", 0, (24, 1, 1), (544, 1, 1), 96, 0),
}


def _dims(*shapes):
    return "[" + ", ".join("[" + ", ".join(map(str, s)) + "]" for s in shapes) + "]"


def _shape_args(dims, types):
    """Extra args string for an op recorded with record_shapes=True."""
    return f', "Input Dims": {_dims(*dims)}, "Input type": [{", ".join(chr(34) + t + chr(34) for t in types)}]'


BF, F32, I64 = "c10::BFloat16", "float", "long int"
X = (BATCH, SEQ, HIDDEN)
SHAPES = {
    "ln": _shape_args([X, [HIDDEN], [HIDDEN], [HIDDEN], []], [BF, "", F32, F32, "Scalar"]),
    "qkv": _shape_args([X, [3 * HIDDEN, HIDDEN], [3 * HIDDEN]], [BF, F32, F32]),
    "proj": _shape_args([X, [HIDDEN, HIDDEN], [HIDDEN]], [BF, F32, F32]),
    "fc1": _shape_args([X, [FFN, HIDDEN], [FFN]], [BF, F32, F32]),
    "fc2": _shape_args([(BATCH, SEQ, FFN), [HIDDEN, FFN], [HIDDEN]], [BF, F32, F32]),
    "lm": _shape_args([X, [VOCAB, HIDDEN], []], [BF, F32, ""]),
    "addmm": _shape_args(
        [[3 * HIDDEN], [TOKENS, HIDDEN], [HIDDEN, 3 * HIDDEN], [], []], [BF, BF, BF, "Scalar", "Scalar"]
    ),
    "sdpa": _shape_args([(BATCH, HEADS, SEQ, 64)] * 3 + [[], []], [BF, BF, BF, "", "Scalar"]),
    "add": _shape_args([X, X, []], [BF, BF, "Scalar"]),
    "gelu": _shape_args([(BATCH, SEQ, FFN), []], [BF, "Scalar"]),
    "to": _shape_args([[HIDDEN, HIDDEN], [], [], [], [], []], [F32, "Scalar", "", "", "", "Scalar"]),
    "embed": _shape_args([[VOCAB, HIDDEN], [BATCH, SEQ], [], [], []], [F32, I64, "Scalar", "Scalar", "Scalar"]),
    "loss": _shape_args([(TOKENS, VOCAB), [TOKENS], [], [], [], []], [F32, I64, "", "Scalar", "Scalar", "Scalar"]),
    "copy": _shape_args([[BATCH, SEQ], [BATCH, SEQ], []], [I64, I64, "Scalar"]),
    "none": "",
}

H100 = (
    '{{\n      "id": {i}, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85045477376,\n'
    '      "computeMajor": 9, "computeMinor": 0,\n'
    '      "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,\n'
    '      "regsPerBlock": 65536, "warpSize": 32,\n'
    '      "sharedMemPerBlock": 49152, "numSms": 132\n'
    '    , "regsPerMultiprocessor": 65536, "sharedMemPerBlockOptin": 232448, "sharedMemPerMultiprocessor": 233472\n'
    "    }}"
)


def ts(ns: int) -> str:
    """Kineto's relative timestamp: microseconds with 3 decimals (ns resolution)."""
    return f"{ns // 1000}.{ns % 1000:03d}"


def speed_factor(seed, rank, step, straggler_rank, straggler_factor):
    """GPU slowness of `rank` in `step` (1.0 = nominal): small jitter, larger for the straggler."""
    f = 1.0 + 0.04 * (random.Random(f"speed/{seed}/{rank}/{step}").random() - 0.5)
    return f * straggler_factor if rank == straggler_rank else f


class Sink:
    """Buffered text writer that counts bytes (everything written is ASCII)."""

    def __init__(self, path=None, compress=False):
        self.bytes = 0
        self.parts, self.pending = [], 0
        self.raw = self.gz = None
        if path is not None:
            self.raw = open(path, "wb")
            # mtime=0 and no file name in the header keep .gz output byte-identical per seed.
            self.gz = (
                gzip.GzipFile(filename="", mode="wb", fileobj=self.raw, compresslevel=3, mtime=0) if compress else None
            )

    def write(self, s: str):
        self.parts.append(s)
        self.pending += len(s)
        if self.pending > 1 << 20:
            self.flush()

    def flush(self):
        data = "".join(self.parts)
        self.parts, self.pending = [], 0
        self.bytes += len(data)
        if self.raw is not None:
            (self.gz or self.raw).write(data.encode("ascii"))

    def close(self):
        self.flush()
        if self.gz is not None:
            self.gz.close()
        if self.raw is not None:
            self.raw.close()


class Thread:
    """A CPU thread: its clock (ns), open operators and the buffered events of the current tree."""

    def __init__(self, tid):
        self.tid = tid
        self.t = 0
        self.stack = []
        self.buf = []
        self.held = 0


class RankTrace:
    """Simulates and writes the trace of one rank, step by step."""

    def __init__(self, cfg, rank, sink):
        self.cfg, self.rank, self.out = cfg, rank, sink
        self.rng = random.Random(f"events/{cfg.seed}/{rank}")
        jobrng = random.Random(f"job/{cfg.seed}")
        self.base_ns = 1_700_000_000_000_000_000 + jobrng.randrange(10**8) * 10**9
        self.t0 = jobrng.randrange(10**15, 4 * 10**15)  # relative start, ns (~10^12 us, like real traces)
        self.pid = 100_000 + jobrng.randrange(3_000_000) + 131 * rank
        self.device = rank % 8
        self.main = Thread(self.pid)
        self.autograd = Thread(self.pid + 9_503)
        self.main.t = self.autograd.t = self.t0 + 300_000
        self.gpu = {COMPUTE: self.main.t, COMM: self.main.t}
        self.ext = self.ev_idx = 0
        # CUPTI correlation ids count from process start, so a profiling window starts high.
        # (Ids < 32768 with > 32767 events also crash HTA 0.6.1 on pandas 3: index_correlation
        # inherits the int16 dtype of the correlation column.)
        self.corr = 50_000 + self.rng.randrange(500_000)
        self.seq = 0
        self.coll_seq = 0
        self.gpu_annotations = []  # open GPU-side annotations: [name, ext, stream, first_ts, last_end]
        world = cfg.world_size
        self.pg_args = (
            f'"Group size": {world}, "Process Group Name": "0", "Process Group Description": "default_pg", '
            f'"Process Group Ranks": "[{", ".join(map(str, range(world)))}]"'
            if world <= 64
            else f'"Group size": {world}, "Process Group Name": "0", "Process Group Description": "default_pg", '
            f'"Process Group Ranks": "[0, ..., {world - 1}]"'
        )
        # Nominal GPU time of one step (us), used to size the all-gather (~3% of a step).
        block_us = sum(K[k].dur_ns for k in BLOCK_KERNELS) / 1000
        self.step_us = block_us * cfg.blocks + 3_000
        self.busy = 0  # compute-stream busy time (ns) since the last cross-rank sync point

    # ---- low-level emitters -------------------------------------------------------------

    def _noise(self):
        return 0.92 + 0.16 * self.rng.random()

    def _gpu_noise(self):
        # Identical work takes nearly the same time on every rank: most of the variation comes from
        # a generator shared by all ranks (same seed and step, same kernel sequence), 1% is per rank.
        return (0.92 + 0.16 * self.shared_rng.random()) * (0.995 + 0.01 * self.rng.random())

    def begin(self, th, name, extra="", cat="cpu_op", pre_us=3.0, hold=True):
        """Open an operator / annotation at the thread's clock; its event is written when it ends.

        Events of a held frame (operators) are kept in the thread's buffer so that an operator is
        written before its children; long annotations (hold=False) are written after theirs, which
        keeps at most one operator tree in memory.
        """
        th.t += int(pre_us * 1000 * self._noise())
        self.ext += 1
        self.ev_idx += 1
        slot = None
        if hold:
            slot = len(th.buf)
            th.buf.append(None)
            th.held += 1
        th.stack.append((slot, name, cat, th.t, self.ext, self.ev_idx, extra))
        return self.ext

    def end(self, th, post_us=1.5):
        th.t += int(post_us * 1000 * self._noise())
        slot, name, cat, start, ext, idx, extra = th.stack.pop()
        event = (
            f',\n  {{\n    "ph": "X", "cat": "{cat}", "name": "{name}", "pid": {self.pid}, "tid": {th.tid},\n'
            f'    "ts": {ts(start)}, "dur": {ts(th.t - start)},\n'
            f'    "args": {{\n      "External id": {ext},"Record function id": 0, "Ev Idx": {idx}{extra}\n    }}\n  }}'
        )
        if slot is None:
            self.out.write(event)
        else:
            th.buf[slot] = event
            th.held -= 1
            if not th.held:
                self.out.write("".join(th.buf))
                th.buf.clear()

    def emit(self, th, event):
        """Write a CPU-side event now, or after the operator being recorded on this thread."""
        if th.held:
            th.buf.append(event)
        else:
            self.out.write(event)

    def op_ext(self, th):
        """External id runtime calls inherit: the innermost cpu_op (annotations do not count)."""
        for frame in reversed(th.stack):
            if frame[2] == "cpu_op":
                return frame[4]
        return th.stack[-1][4] if th.stack else 0

    def leaf(self, th, name, extra="", dur_us=2.0):
        self.begin(th, name, extra, pre_us=1.0)
        th.t += int(dur_us * 1000 * self._noise())
        self.end(th, post_us=0.3)

    def runtime(self, th, name, dur_us, flow=False, until=None):
        """A CUDA runtime call at the thread's clock (lasting at least until ``until``, ns, when it blocks);
        returns (correlation, end time)."""
        self.corr += 1
        th.t += int(1000 * self._noise())
        start, dur = th.t, int(dur_us * 1000 * self._noise())
        if until is not None:
            dur = max(dur, until - start)
        th.t += dur
        self.emit(
            th,
            (
                f',\n  {{\n    "ph": "X", "cat": "cuda_runtime", "name": "{name}", "pid": {self.pid}, "tid": {th.tid},\n'
                f'    "ts": {ts(start)}, "dur": {ts(dur)},\n'
                f'    "args": {{\n      "External id": {self.op_ext(th)},      "cbid": {CBID[name]}, "correlation": {self.corr}\n    }}\n  }}'
            ),
        )
        if flow:
            self.emit(
                th,
                (
                    f',\n  {{\n    "ph": "s", "id": {self.corr}, "pid": {self.pid}, "tid": {th.tid}, "ts": {ts(start)},\n'
                    f'    "cat": "ac2g", "name": "ac2g"\n  }}'
                ),
            )
        return self.corr, th.t

    def _gpu_event(self, cat, name, stream, start, dur, corr, ext, tail):
        self.out.write(
            f',\n  {{\n    "ph": "X", "cat": "{cat}", "name": "{name}", "pid": {self.device}, "tid": {stream},\n'
            f'    "ts": {ts(start)}, "dur": {ts(dur)},\n'
            f'    "args": {{\n      "External id": {ext},      "queued": 0, "device": {self.device}, "context": 1,      '
            f'"stream": {stream}, "correlation": {corr},      {tail}\n    }}\n  }}'
            f',\n  {{\n    "ph": "f", "id": {corr}, "pid": {self.device}, "tid": {stream}, "ts": {ts(start)},\n'
            f'    "cat": "ac2g", "name": "ac2g", "bp": "e"\n  }}'
        )
        for ann in self.gpu_annotations:
            if ann[2] == stream:
                if ann[3] is None:
                    ann[3] = start
                ann[4] = start + dur

    def launch(self, th, key, stream=COMPUTE, scale=1.0, api="cudaLaunchKernel"):
        """Launch kernel K[key] from the thread; it runs when the stream is free."""
        kernel = K[key]
        corr, call_end = self.runtime(th, api, 5.0, flow=True)
        start = max(call_end + int(2000 * self._noise()), self.gpu[stream])
        dur = int(kernel.dur_ns * scale * self.speed * self._gpu_noise())
        self.gpu[stream] = start + dur
        if stream == COMPUTE:
            self.busy += dur
        self._gpu_event("kernel", kernel.name, stream, start, dur, corr, self.op_ext(th), kernel.tail)

    def memory(self, th, api, name, nbytes, gbps):
        corr, call_end = self.runtime(th, api, 6.0, flow=True)
        start = max(call_end + 1500, self.gpu[COMPUTE])
        dur = max(1000, int(nbytes / gbps * self._gpu_noise()))  # bytes / (GB/s) = ns
        self.gpu[COMPUTE] = start + dur
        self.busy += dur
        cat = "gpu_memset" if api == "cudaMemsetAsync" else "gpu_memcpy"
        tail = f'"bytes": {nbytes}, "memory bandwidth (GB/s)": {nbytes / dur!r}'
        self._gpu_event(cat, name, COMPUTE, start, dur, corr, self.op_ext(th), tail)

    def annotation(self, th, name, gpu_stream=None, pre_us=4.0):
        ext = self.begin(th, name, cat="user_annotation", pre_us=pre_us, hold=False)
        if gpu_stream is not None:
            self.gpu_annotations.append([name, ext, gpu_stream, None, 0])
        return ext

    def end_annotation(self, th, ext=None, post_us=2.0):
        self.end(th, post_us)
        for ann in self.gpu_annotations:
            if ann[1] == ext:
                self.gpu_annotations.remove(ann)
                if ann[3] is not None:
                    self.out.write(
                        f',\n  {{\n    "ph": "X", "cat": "gpu_user_annotation", "name": "{ann[0]}", '
                        f'"pid": {self.device}, "tid": {ann[2]},\n    "ts": {ts(ann[3])}, "dur": {ts(ann[4] - ann[3])},\n'
                        f'    "args": {{\n      "External id": {ann[1]}\n    }}\n  }}'
                    )
                break

    # ---- operators --------------------------------------------------------------------

    def fwd_op(self, name, shapes):
        """Open a forward operator that creates an autograd node (gets a sequence number)."""
        self.seq += 1
        return self.begin(self.main, name, SHAPES[shapes] + f', "Sequence number": {self.seq}, "Fwd thread id": 0')

    def linear(self, shapes, gemm, split_k=False):
        th = self.main
        self.fwd_op("aten::linear", shapes)
        self.begin(th, "aten::to", SHAPES["to"])
        self.begin(th, "aten::_to_copy", SHAPES["to"])
        self.leaf(th, "aten::empty_strided")
        self.begin(th, "aten::copy_")
        self.launch(th, "cast")
        self.end(th)
        self.end(th)
        self.end(th)
        self.begin(th, "aten::t")
        self.begin(th, "aten::transpose")
        self.leaf(th, "aten::as_strided")
        self.end(th)
        self.end(th)
        self.begin(th, "aten::addmm", SHAPES["addmm"], pre_us=6.0)
        self.launch(th, gemm)
        if split_k:
            self.launch(th, "splitk")
        self.end(th)
        self.end(th)
        return self.seq

    def simple_fwd(self, name, shapes, inner, kernels):
        th = self.main
        self.fwd_op(name, shapes)
        for op in inner:
            self.begin(th, op)
        for k in kernels:
            self.launch(th, k)
        for _ in inner:
            self.end(th)
        self.end(th)
        return self.seq

    def bwd_node(self, node, seq, ops, accumulate=0):
        """An autograd node on the autograd thread: evaluate_function > Node > [(op, kernels)]."""
        th = self.autograd
        tag = f', "Sequence number": {seq}, "Fwd thread id": 1'
        self.begin(th, f"autograd::engine::evaluate_function: {node}", tag, pre_us=8.0)
        self.begin(th, node, tag)
        for op, kernels in ops:
            self.begin(th, op)
            for k in kernels:
                self.launch(th, k)
            self.end(th)
        self.end(th)
        self.end(th)
        for _ in range(accumulate):
            self.begin(th, "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", pre_us=4.0)
            self.begin(th, "torch::autograd::AccumulateGrad")
            self.begin(th, "aten::add_")
            self.launch(th, "add_")
            self.end(th)
            self.end(th)
            self.end(th)

    def linear_bwd(self, seq, gemm, split_k=False):
        k = [gemm, "splitk"] if split_k else [gemm]
        self.bwd_node(
            "AddmmBackward0",
            seq,
            [("aten::t", []), ("aten::mm", k), ("aten::t", []), ("aten::mm", k), ("aten::sum", ["bias_grad"])],
        )
        self.bwd_node("ToCopyBackward0", seq, [("aten::to", ["cast"])], accumulate=2)

    def collective(self, th, kind, nelems, dtype, transfer_us, gpu_ready):
        """record_param_comms > nccl:<op> > launch on the comm stream, synchronised across ranks."""
        name, key, coll = {
            "allreduce": ("nccl:all_reduce", "allreduce", "allreduce"),
            "allgather": ("nccl:_all_gather_base", "allgather", "_allgather_base"),
        }[kind]
        world = self.cfg.world_size
        out_nelems = nelems * world if kind == "allgather" else nelems
        self.coll_seq += 1
        args = (
            f', "Collective name": "{coll}", "In msg nelems": {nelems}, "Out msg nelems": {out_nelems}, '
            f'"dtype": "{dtype}", "In split size": "[]", "Out split size": "[]", "Global rank start": 0, '
            f'"Global rank stride": 1, "Rank": {self.rank}, "Seq": {self.coll_seq}, {self.pg_args}'
        )
        ext = self.begin(th, "record_param_comms", args, pre_us=10.0)
        self.runtime(th, "cudaStreamIsCapturing", 1.0)
        self.runtime(th, "cudaEventRecord", 1.5)
        self.runtime(th, "cudaStreamWaitEvent", 1.5)
        ann = self.annotation(th, name, gpu_stream=COMM, pre_us=8.0)
        corr, call_end = self.runtime(th, "cudaLaunchKernelExC", 11.0, flow=True)
        # The comm stream waits for the compute stream (gradients ready), then for its own queue.
        ready = max(call_end + 3000, gpu_ready)
        start = max(ready, self.gpu[COMM])
        # When does the slowest rank get here?  Every rank's compute stream restarted at the same time
        # (the last sync point); since then it ran `busy` ns of kernels, which take speed_max/speed
        # times longer on the slowest rank.
        latest = ready + int(self.busy * (self.speed_max / self.speed - 1))
        transfer = int(
            transfer_us * 1000 * (0.97 + 0.06 * random.Random(f"coll/{self.cfg.seed}/{self.coll_seq}").random())
        )
        end = max(latest, self.gpu[COMM], start) + transfer
        self.gpu[COMM] = end
        tail = K[key].tail + args.replace(f'"Rank": {self.rank}, "Seq": {self.coll_seq}, ', "").replace(
            '"Global rank start": 0, "Global rank stride": 1, ', ""
        )
        self._gpu_event("kernel", K[key].name, COMM, start, end - start, corr, ext, tail)
        self.end_annotation(th, ann, post_us=3.0)
        self.runtime(th, "cudaEventRecord", 1.0)
        self.end(th, post_us=4.0)

    # ---- a training step ----------------------------------------------------------------

    def step(self, s):
        cfg, th, ag = self.cfg, self.main, self.autograd
        self.shared_rng = random.Random(f"gpu/{cfg.seed}/{s}")
        self.speed = speed_factor(cfg.seed, self.rank, s, cfg.straggler_rank, cfg.straggler_factor)
        self.speed_max = max(
            speed_factor(cfg.seed, r, s, cfg.straggler_rank, cfg.straggler_factor) for r in range(cfg.world_size)
        )
        step_ext = self.annotation(th, f"ProfilerStep#{FIRST_STEP + s}", gpu_stream=COMPUTE, pre_us=20.0)

        loader = self.annotation(th, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__")
        th.t += int(400_000 * self._noise())
        self.end_annotation(th, loader)
        zero = self.annotation(th, "Optimizer.zero_grad#AdamW.zero_grad")
        th.t += int(60_000 * self._noise())
        self.end_annotation(th, zero)
        for _ in range(2):  # input ids and labels to the GPU
            self.begin(th, "aten::to", SHAPES["copy"])
            self.begin(th, "aten::_to_copy")
            self.leaf(th, "aten::empty_strided")
            self.begin(th, "aten::copy_", SHAPES["copy"])
            self.memory(th, "cudaMemcpyAsync", "Memcpy HtoD (Pinned -> Device)", TOKENS * 8, 22.0)
            self.end(th)
            self.end(th)
            self.end(th)

        # Forward.
        fwd = self.annotation(th, "DistributedDataParallel.forward", gpu_stream=COMPUTE, pre_us=30.0)
        seq_embed = self.simple_fwd("aten::embedding", "embed", ["aten::index_select"], ["embed"])
        blocks = []
        for _ in range(cfg.blocks):
            b = {}
            b["ln1"] = self.simple_fwd("aten::layer_norm", "ln", ["aten::native_layer_norm"], ["ln"])
            b["qkv"] = self.linear("qkv", "gemm_qkv")
            b["attn"] = self.simple_fwd(
                "aten::scaled_dot_product_attention",
                "sdpa",
                ["aten::_scaled_dot_product_flash_attention", "aten::_flash_attention_forward"],
                ["flash_fwd"],
            )
            b["proj"] = self.linear("proj", "gemm_proj")
            b["add1"] = self.simple_fwd("aten::add", "add", [], ["add"])
            b["ln2"] = self.simple_fwd("aten::layer_norm", "ln", ["aten::native_layer_norm"], ["ln"])
            b["fc1"] = self.linear("fc1", "gemm_fc", split_k=True)
            b["gelu"] = self.simple_fwd("aten::gelu", "gelu", [], ["gelu"])
            b["fc2"] = self.linear("fc2", "gemm_fc", split_k=True)
            b["add2"] = self.simple_fwd("aten::add", "add", [], ["add"])
            blocks.append(b)
        seq_lnf = self.simple_fwd("aten::layer_norm", "ln", ["aten::native_layer_norm"], ["ln"])
        seq_lm = self.linear("lm", "gemm_lm")
        seq_loss = self.simple_fwd(
            "aten::cross_entropy_loss", "loss", ["aten::log_softmax", "aten::_log_softmax"], ["log_softmax"]
        )
        self.simple_fwd("aten::nll_loss_nd", "none", ["aten::nll_loss", "aten::nll_loss_forward"], ["nll"])
        self.end_annotation(th, fwd, post_us=20.0)

        # Gather a per-rank buffer (e.g. for a contrastive loss or metrics): old-style NCCL kernel name.
        gather_us = 0.03 * self.step_us
        self.collective(th, "allgather", int(gather_us * BUS_BYTES_PER_US), "Char", gather_us, self.gpu[COMPUTE])

        # Backward: the main thread waits while the autograd thread runs the graph.
        bwd = self.annotation(th, "## backward ##", gpu_stream=COMPUTE)
        self.begin(th, "aten::ones_like")
        self.leaf(th, "aten::empty_like")
        self.begin(th, "aten::fill_")
        self.launch(th, "fill")
        self.end(th)
        self.end(th)
        ag.t = th.t + 25_000
        self.bwd_node("NllLossBackward0", seq_loss + 1, [("aten::nll_loss_backward", ["nll_bwd"])])
        self.bwd_node("LogSoftmaxBackward0", seq_loss, [("aten::_log_softmax_backward_data", ["log_softmax_bwd"])])
        self.linear_bwd(seq_lm, "gemm_lm")
        self.bwd_node(
            "NativeLayerNormBackward0",
            seq_lnf,
            [("aten::native_layer_norm_backward", ["ln_bwd_in", "ln_bwd_gamma"])],
            accumulate=2,
        )
        bucket_us = 2 * (cfg.world_size - 1) / cfg.world_size * BLOCK_PARAMS * 4 / BUS_BYTES_PER_US
        for b in reversed(blocks):
            self.bwd_node("AddBackward0", b["add2"], [])
            self.linear_bwd(b["fc2"], "gemm_fc", split_k=True)
            self.bwd_node("GeluBackward0", b["gelu"], [("aten::gelu_backward", ["gelu_bwd"])])
            self.linear_bwd(b["fc1"], "gemm_fc", split_k=True)
            self.bwd_node(
                "NativeLayerNormBackward0",
                b["ln2"],
                [("aten::native_layer_norm_backward", ["ln_bwd_in", "ln_bwd_gamma"])],
                accumulate=2,
            )
            self.bwd_node("AddBackward0", b["add1"], [])
            self.linear_bwd(b["proj"], "gemm_proj")
            self.bwd_node(
                "ScaledDotProductFlashAttentionBackward0",
                b["attn"],
                [("aten::_scaled_dot_product_flash_attention_backward", ["flash_bwd", "flash_bwd_dq"])],
            )
            self.linear_bwd(b["qkv"], "gemm_qkv")
            self.bwd_node(
                "NativeLayerNormBackward0",
                b["ln1"],
                [("aten::native_layer_norm_backward", ["ln_bwd_in", "ln_bwd_gamma"])],
                accumulate=2,
            )
            # DDP reducer: one gradient bucket per block, all-reduced as soon as it is ready.
            self.collective(ag, "allreduce", BLOCK_PARAMS, "Float", bucket_us, self.gpu[COMPUTE])
        self.begin(
            ag,
            "autograd::engine::evaluate_function: EmbeddingBackward0",
            f', "Sequence number": {seq_embed}, "Fwd thread id": 1',
            pre_us=8.0,
        )
        self.begin(ag, "EmbeddingBackward0", f', "Sequence number": {seq_embed}, "Fwd thread id": 1')
        self.begin(ag, "aten::embedding_backward")
        self.begin(ag, "aten::embedding_dense_backward")
        self.memory(ag, "cudaMemsetAsync", "Memset (Device)", VOCAB * HIDDEN * 4, 1300.0)
        self.launch(ag, "embed_bwd")
        self.end(ag)
        self.end(ag)
        self.end(ag)
        self.end(ag)
        th.t = ag.t + 15_000
        self.end_annotation(th, bwd)

        # Optimizer: wait for the last all-reduce, then fused multi-tensor AdamW kernels.
        opt = self.annotation(th, "Optimizer.step#AdamW.step", gpu_stream=COMPUTE, pre_us=40.0)
        self.runtime(th, "cudaStreamWaitEvent", 2.0)
        self.gpu[COMPUTE] = max(self.gpu[COMPUTE], self.gpu[COMM])
        self.busy = 0  # sync point: all ranks' compute streams resume when the last all-reduce ends
        self.begin(th, "aten::_fused_adamw_")
        for _ in range(max(1, cfg.blocks // 2)):
            self.launch(th, "adam", scale=2.0 if cfg.blocks > 1 else 1.0)
        self.end(th)
        self.end_annotation(th, opt, post_us=30.0)

        # loss.item(): copy to the host and wait for the GPU.
        self.begin(th, "aten::item")
        self.begin(th, "aten::_local_scalar_dense")
        self.memory(th, "cudaMemcpyAsync", "Memcpy DtoH (Device -> Pageable)", 4, 0.5)
        self.runtime(th, "cudaStreamSynchronize", 2.0, until=self.gpu[COMPUTE] + 2_000)  # returns once the GPU is done
        th.t = max(th.t, self.gpu[COMPUTE] + 4_000)
        self.end(th)
        self.end(th)
        self.end_annotation(th, step_ext, post_us=50.0)

    # ---- the file -----------------------------------------------------------------------

    def header(self):
        cfg, out = self.cfg, self.out
        world = cfg.world_size
        pg = (
            f'{{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl", "pg_size": {world}, '
            f'"ranks": [{", ".join(map(str, range(world)))}]}}'
        )
        devices = ",\n    ".join(H100.format(i=i) for i in range(8))
        out.write(
            "\n{\n"
            '  "schemaVersion": 1,\n'
            f'  "deviceProperties": [\n    {devices}\n  ],\n'
            f'  "distributedInfo": {{"backend": "nccl", "rank": {self.rank}, "world_size": {world}, '
            f'"pg_count": 1, "pg_config": [{pg}], "nccl_version": "2.21.5"}},\n'
            '  "record_shapes": 1,\n'
            '  "cuda_runtime_version": 12040,\n  "cupti_version": 22,\n  "cuda_driver_version": 12080,\n'
            '  "traceEvents": [\n'
        )
        start = self.t0
        meta = [
            ("process_name", self.pid, 0, '"name": "python3"'),
            ("process_labels", self.pid, 0, '"labels": "CPU"'),
            ("process_sort_index", self.pid, 0, f'"sort_index": {self.pid}'),
            ("process_name", self.device, 0, '"name": "python3"'),
            ("process_labels", self.device, 0, f'"labels": "GPU {self.device}"'),
            ("process_sort_index", self.device, 0, f'"sort_index": {16777216 + self.device}'),
        ]
        for stream in (COMPUTE, COMM):
            meta += [
                ("thread_name", self.device, stream, f'"name": "stream {stream} "'),
                ("thread_sort_index", self.device, stream, f'"sort_index": {stream}'),
            ]
        for tid, label in ((self.main.tid, "pt_main_thread"), (self.autograd.tid, "pt_autograd_0")):
            meta += [
                ("thread_name", self.pid, tid, f'"name": "thread {tid} ({label})"'),
                ("thread_sort_index", self.pid, tid, f'"sort_index": {tid}'),
            ]
        out.write(
            ",\n".join(
                f'  {{\n    "name": "{name}", "ph": "M", "ts": {ts(start)}, "pid": {pid}, "tid": {tid},\n'
                f'    "args": {{\n      {args}\n    }}\n  }}'
                for name, pid, tid, args in meta
            )
        )

    def footer(self):
        end = max(self.main.t, self.gpu[COMPUTE], self.gpu[COMM]) + 100_000
        ops = self.ext
        self.out.write(
            f',\n  {{\n    "ph": "X", "cat": "Trace", "ts": {ts(self.t0)}, "dur": {ts(end - self.t0)},\n'
            f'    "pid": "Spans", "tid": "PyTorch Profiler",\n    "name": "PyTorch Profiler (0)",\n'
            f'    "args": {{\n      "Op count": {ops}\n    }}\n  }}'
            f',\n  {{\n    "name": "process_sort_index", "ph": "M", "ts": {ts(self.t0)},\n'
            f'    "pid": "Spans", "tid": 0,\n    "args": {{\n      "sort_index": 536870912\n    }}\n  }}'
            f',\n  {{\n    "name": "Iteration Start: PyTorch Profiler", "ph": "i", "s": "g",\n'
            f'    "pid": "Traces", "tid": "Trace PyTorch Profiler", "ts": {ts(self.t0)}\n  }}'
            f',\n  {{\n    "name": "Record Window End", "ph": "i", "s": "g",\n'
            f'    "pid": "", "tid": "", "ts": {ts(end)}\n  }}\n'
            "  ],\n"
            f'  "traceName": "holotrace_generated_rank{self.rank}.pt.trace.json",\n'
            '  "displayTimeUnit": "ms",\n'
            f'  "baseTimeNanoseconds": {self.base_ns}\n'
            "}\n"
        )

    def write(self, steps):
        self.header()
        for s in range(steps):
            self.step(s)
        self.footer()


# Nominal kernels of one block, forward + backward (to size collectives).
BLOCK_KERNELS = (
    [
        "ln",
        "cast",
        "gemm_qkv",
        "flash_fwd",
        "cast",
        "gemm_proj",
        "add",
        "ln",
        "cast",
        "gemm_fc",
        "splitk",
        "gelu",
        "cast",
        "gemm_fc",
        "splitk",
        "add",
    ]
    + ["gemm_fc", "splitk"] * 4
    + [
        "gemm_qkv",
        "gemm_qkv",
        "gemm_proj",
        "gemm_proj",
        "flash_bwd",
        "gelu_bwd",
        "ln_bwd_in",
        "ln_bwd_gamma",
        "ln_bwd_in",
        "ln_bwd_gamma",
    ]
    + ["bias_grad", "cast"] * 4
    + ["add_"] * 12
)


class Config:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def _bytes_for(cfg, blocks, steps):
    probe = Config(**{**cfg.__dict__, "blocks": blocks})
    sink = Sink()
    RankTrace(probe, 0, sink).write(steps)
    sink.close()
    return sink.bytes


def choose_blocks(cfg):
    """Number of transformer blocks so that `steps` steps make about target_mb per rank."""
    target = cfg.target_mb * 1e6
    header = _bytes_for(cfg, 1, 0)  # header, metadata events and footer
    one, two = _bytes_for(cfg, 1, 1), _bytes_for(cfg, 2, 1)
    per_block = two - one
    fixed_step = one - per_block - header
    blocks = round(((target - header) / cfg.steps - fixed_step) / per_block)
    return max(1, blocks)


def trace_path(out, rank, compress):
    return os.path.join(out, f"rank-{rank}.pt.trace.json" + (".gz" if compress else ""))


def _generate_rank(args):
    cfg, rank = args
    path = trace_path(cfg.out, rank, cfg.gzip)
    tmp = path + ".partial"
    t = time.perf_counter()
    sink = Sink(tmp, cfg.gzip)
    RankTrace(cfg, rank, sink).write(cfg.steps)
    sink.close()
    os.replace(tmp, path)
    return rank, path, sink.bytes, os.path.getsize(path), time.perf_counter() - t


def generate(
    out,
    ranks=1,
    target_mb=50.0,
    steps=8,
    gzip_output=False,
    seed=0,
    world_size=None,
    straggler_rank=-1,
    straggler_factor=1.3,
    jobs=None,
    blocks=None,
    log=print,
):
    """Write `ranks` trace files into `out`; returns a summary dict (also usable from other scripts)."""
    world_size = world_size or ranks
    if ranks > world_size:
        raise ValueError("--ranks cannot exceed --world-size")
    os.makedirs(out, exist_ok=True)
    cfg = Config(
        out=out,
        ranks=ranks,
        target_mb=target_mb,
        steps=steps,
        gzip=gzip_output,
        seed=seed,
        world_size=world_size,
        straggler_rank=straggler_rank,
        straggler_factor=straggler_factor,
        blocks=1,
    )
    cfg.blocks = blocks or choose_blocks(cfg)
    log(
        f"generating {ranks} rank(s) x ~{target_mb:g} MB: {steps} steps, {cfg.blocks} blocks, seed {seed}"
        + (f", straggler rank {straggler_rank} x{straggler_factor:g}" if straggler_rank >= 0 else "")
    )
    t = time.perf_counter()
    jobs = max(1, min(jobs or os.cpu_count() or 1, ranks))
    work = [(cfg, r) for r in range(ranks)]
    if jobs == 1:
        results = list(map(_generate_rank, work))
    else:
        with ProcessPoolExecutor(jobs) as pool:
            results = list(pool.map(_generate_rank, work))
    files = []
    for rank, path, raw, size, secs in results:
        log(f"  rank {rank}: {raw / 1e6:.1f} MB JSON ({size / 1e6:.1f} MB on disk) in {secs:.1f} s -> {path}")
        files.append({"rank": rank, "path": path, "json_bytes": raw, "file_bytes": size})
    return {
        "generator": {
            "version": VERSION,
            "ranks": ranks,
            "world_size": world_size,
            "target_mb": target_mb,
            "steps": steps,
            "blocks": cfg.blocks,
            "gzip": gzip_output,
            "seed": seed,
            "straggler_rank": straggler_rank,
            "straggler_factor": straggler_factor,
        },
        "files": files,
        "json_bytes": sum(f["json_bytes"] for f in files),
        "seconds": time.perf_counter() - t,
    }


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="output folder (one file per rank)")
    p.add_argument("--ranks", type=int, default=1, help="number of rank files to write (ranks 0..N-1)")
    p.add_argument("--world-size", type=int, default=None, help="job world size (default: --ranks)")
    p.add_argument("--target-mb", type=float, default=50.0, help="approximate uncompressed JSON MB per rank")
    p.add_argument("--steps", type=int, default=8, help="profiler steps per rank")
    p.add_argument("--blocks", type=int, default=None, help="transformer blocks (default: chosen from --target-mb)")
    p.add_argument("--gzip", action="store_true", help="write .json.gz instead of .json")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--straggler-rank", type=int, default=-1, help="make this rank's GPU work slower")
    p.add_argument("--straggler-factor", type=float, default=1.3, help="slowdown of the straggler rank")
    p.add_argument("--jobs", type=int, default=None, help="parallel processes (default: CPU count)")
    p.add_argument("--summary", help="also write the generation summary as JSON to this file")
    a = p.parse_args(argv)
    if a.steps < 1 or a.ranks < 1:
        p.error("--steps and --ranks must be >= 1")
    summary = generate(
        a.out,
        a.ranks,
        a.target_mb,
        a.steps,
        a.gzip,
        a.seed,
        a.world_size,
        a.straggler_rank,
        a.straggler_factor,
        a.jobs,
        a.blocks,
    )
    mb = summary["json_bytes"] / 1e6
    print(f"done: {mb:.1f} MB JSON in {summary['seconds']:.1f} s ({mb / summary['seconds']:.1f} MB/s)")
    if a.summary:
        with open(a.summary, "w") as f:
            json.dump(summary, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
