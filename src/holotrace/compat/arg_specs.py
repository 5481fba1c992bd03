"""HTA's event-arg specifications (``hta.configs.default_values``, the arg sets of ``hta.configs.parser_config``).

An :class:`AttributeSpec` names one event arg: its column (``name``), its key in the trace (``raw_name``), its
type and default. :data:`AVAILABLE_ARGS` lists them under HTA's keys (``"cuda::stream"``, ``"kernel::queued"``,
...): first the args holotrace's decoder reads for every event (:data:`holotrace.schema.ARG_SPECS`, with their
columns and defaults), then the other args HTA knows, which holotrace reads with ``parse_all_args=True``
(``holotrace.load(..., all_args=True)``). The named sets (``ARGS_MINIMUM``, ``ARGS_DEFAULT``, ...) are HTA's.
holotrace decodes the same args whatever set a :class:`~holotrace.compat.configs.ParserConfig` holds; the sets
exist so that code written for HTA builds and inspects its configurations unchanged.
"""

from __future__ import annotations

import re
from enum import Enum
from typing import NamedTuple, Union

from holotrace.schema import ARG_SPECS

__all__ = [
    "ValueType",
    "YamlVersion",
    "AttributeSpec",
    "AVAILABLE_ARGS",
    "DEFAULT_PARSE_VERSION",
    "ARG_SETS",
    "transform_arg_name",
    "make_attribute_spec",
]


class ValueType(Enum):
    Int = 1
    Float = 2
    String = 3
    Object = 4


class YamlVersion(NamedTuple):
    major: int
    minor: int
    patch: int

    def get_version_str(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"

    @staticmethod
    def from_string(version_str: str) -> YamlVersion:
        m = re.match(r"^(\d+)\.(\d+)\.(\d+)$", version_str)
        if not m:
            raise ValueError(f"Invalid version string: {version_str}")
        return YamlVersion(*map(int, m.groups()))


DEFAULT_PARSE_VERSION = YamlVersion(1, 0, 0)


class AttributeSpec(NamedTuple):
    name: str
    raw_name: str
    value_type: ValueType
    default_value: Union[int, float, str, object]
    min_supported_version: YamlVersion = DEFAULT_PARSE_VERSION


# HTA's key of each column holotrace decodes for every event (``group::key``; the key is the column unless given)
_GROUPS = {
    "index": ("ev_idx", "external_id", "python_id", "python_parent_id"),
    "cpu_op": ("concrete_inputs", "fwd_thread_id=fwd_thread", "input_dims", "input_type", "input_strides")
    + ("sequence=sequence_number", "kernel_backend", "kernel_hash"),
    "correlation": ("cbid", "correlation=cpu_gpu"),
    "data": ("bytes", "memory_bw_gbps=bandwidth"),
    "cuda": ("device", "stream"),
    "threads": ("block", "grid"),
    "cuda_sync": ("wait_on_stream=stream", "wait_on_cuda_event_record_corr_id=event"),
    "nccl": ("collective_name", "in_msg_nelems", "out_msg_nelems", "in_msg_size", "out_msg_size", "group_size")
    + ("msg_dtype=dtype", "in_split_size", "out_split_size", "process_group_name", "process_group_desc")
    + ("process_group_ranks", "process_rank=rank", "seq_num=seq"),
}
_KEY = {c.split("=")[0]: f"{g}::{c.split('=')[-1]}" for g, cols in _GROUPS.items() for c in cols}
_TYPE = {"int": ValueType.Int, "float": ValueType.Float, "str": ValueType.String, "raw": ValueType.Object}
_RAW_DEFAULT = {"input_dims": "-1", "input_type": "-1", "input_strides": "-1", "msg_dtype": ""}
_RAW_DEFAULT.update(collective_name="", process_group_name="", process_group_desc="", kernel_backend="")
_RAW_DEFAULT.update(kernel_hash="")

# Args HTA knows that holotrace reads only with every arg: (key, column, raw name, type, default)
_ALL_ARGS_ONLY = (
    ("sm::blocks", "blocks_per_sm", "blocks per SM", ValueType.Object, "[]"),
    ("sm::occupancy", "est_occupancy", "est. achieved occupancy %", ValueType.Int, -1),
    ("sm::warps", "warps_per_sm", "warps per SM", ValueType.Float, 0.0),
    ("cuda::context", "context", "context", ValueType.Int, -1),
    ("kernel::queued", "queued", "queued", ValueType.Int, -1),
    ("kernel::shared_memory", "shared_memory", "shared memory", ValueType.Int, -1),
    ("threads::registers", "registers_per_thread", "registers per thread", ValueType.Int, -1),
    ("info::finished", "finished", "finished", ValueType.String, ""),
    ("info::labels", "labels", "labels", ValueType.String, ""),
    ("info::name", "name", "name", ValueType.Int, -1),
    ("info::op_count", "op_count", "Op count", ValueType.Int, -1),
    ("info::sort_index", "sort_index", "sort_index", ValueType.Int, -1),
    ("inference::batch_size", "batch_size", "batchSize", ValueType.Int, -1),
    ("inference::batch_id", "batch_id", "batchId", ValueType.String, ""),
    ("nccl::input_tensors_start", "input_tensors_start", "Input Tensors start", ValueType.Object, "[]"),
    ("nccl::output_tensors_start", "output_tensors_start", "Output Tensors start", ValueType.Object, "[]"),
)


def _decoded(spec) -> tuple[str, AttributeSpec]:
    kind = _TYPE[spec.kind]
    text = "" if kind is ValueType.String else "[]"
    default = _RAW_DEFAULT.get(spec.column, text) if kind in (ValueType.String, ValueType.Object) else spec.default
    key = _KEY.get(spec.column, f"holotrace::{spec.column}")
    return key, AttributeSpec(spec.column, spec.raw_key, kind, default)


AVAILABLE_ARGS: dict[str, AttributeSpec] = dict(_decoded(s) for s in ARG_SPECS if s.column != "external_id_legacy")
AVAILABLE_ARGS.update({k: AttributeSpec(n, r, t, d) for k, n, r, t, d in _ALL_ARGS_ONLY})
for _k in ("nccl::input_tensors_start", "nccl::output_tensors_start"):  # HTA: from arg table version 1.2.0
    AVAILABLE_ARGS[_k] = AVAILABLE_ARGS[_k]._replace(min_supported_version=YamlVersion(1, 2, 0))

_SET_KEYS = {
    "ARGS_INDEX": ("index::external_id", "index::python_id", "index::python_parent_id"),
    "ARGS_INPUT_SHAPE": ("cpu_op::input_dims", "cpu_op::input_type", "cpu_op::input_strides"),
    "ARGS_BANDWIDTH": ("data::bytes", "data::bandwidth"),
    "ARGS_SYNC": ("cuda_sync::stream", "cuda_sync::event"),
    "ARGS_MINIMUM": ("cuda::stream", "correlation::cpu_gpu"),
    "ARGS_INFO": ("info::labels", "info::name", "info::sort_index"),
    "ARGS_COMMUNICATION": tuple(f"nccl::{k}" for k in ("collective_name", "in_msg_nelems", "out_msg_nelems"))
    + tuple(f"nccl::{k}" for k in ("dtype", "group_size", "rank", "in_split_size", "out_split_size")),
    "ARGS_TRITON_KERNELS": ("cpu_op::kernel_backend", "cpu_op::kernel_hash"),
}
ARG_SETS: dict[str, list[AttributeSpec]] = {n: [AVAILABLE_ARGS[k] for k in keys] for n, keys in _SET_KEYS.items()}
ARG_SETS["ARGS_COMPLETE"] = [s for k, s in AVAILABLE_ARGS.items() if not k.startswith("info")]
ARG_SETS["ARGS_DEFAULT"] = [
    s
    for n in ("ARGS_MINIMUM", "ARGS_BANDWIDTH", "ARGS_SYNC", "ARGS_INPUT_SHAPE", "ARGS_INDEX", "ARGS_COMMUNICATION")
    for s in ARG_SETS[n]
]


def transform_arg_name(arg: str) -> str:
    """HTA's column name of a raw arg key: parentheses dropped, lower case, runs of `` -/.%`` → ``_``."""
    arg = re.sub(r"\([^)]*\)", "", arg)
    arg = re.sub(r"[ \-\/\.%]+", "_", arg.lower())
    arg = re.sub(r"_+", "_", arg).strip("_")
    return "arg_name" if arg == "name" else arg


def make_attribute_spec(
    raw_name: str, value: object, min_supported_version: YamlVersion = DEFAULT_PARSE_VERSION
) -> AttributeSpec:
    """The spec of an arg seen with ``value``: its type from the value (bool counts as int, as in HTA)."""
    if isinstance(value, int):
        vt, default = ValueType.Int, 0
    elif isinstance(value, float):
        vt, default = ValueType.Float, 0.0
    elif isinstance(value, str):
        vt, default = ValueType.String, ""
    else:
        vt, default = ValueType.Object, None
    return AttributeSpec(transform_arg_name(raw_name), raw_name, vt, default, min_supported_version)
