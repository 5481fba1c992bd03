"""holotrace: where distributed GPU training wastes time, from PyTorch Profiler traces.

import holotrace
job = holotrace.load("traces/")          # a folder of per-rank Kineto files
job.ranks, job.findings

from holotrace import TraceAnalysis      # HTA-compatible facade
"""

from __future__ import annotations

from holotrace.errors import HolotraceError

__version__ = "0.1.0"

# names imported on first use, so that ``import holotrace`` (and ``holotrace --version``) loads neither
# numpy nor pandas nor pyarrow: name -> module
_LAZY = {
    "load": "holotrace.loader",
    "Job": "holotrace.model.job",
    "RankTrace": "holotrace.model.job",
    "Finding": "holotrace.model.job",
    "TraceAnalysis": "holotrace.compat.trace_analysis",
    "Trace": "holotrace.compat.trace",
    "TraceSymbolTable": "holotrace.compat.trace",
    "CallGraph": "holotrace.compat.call_graph",
    "CallStackGraph": "holotrace.compat.call_graph",
    "LegacyCallGraph": "holotrace.compat.call_graph",
    "MemoryAnalysis": "holotrace.compat.memory_analysis",
    "Timeline": "holotrace.compat.timeline",
    "TimelinePlotSetting": "holotrace.compat.timeline",
    "PlotFormat": "holotrace.compat.timeline",
    "EventType": "holotrace.compat.timeline",
    "prepare_timeline_events": "holotrace.compat.timeline",
    "plot_events_timeline": "holotrace.compat.timeline",
    "align_module_with_kernels": "holotrace.compat.timeline",
    "plot_timeline": "holotrace.compat.timeline",
    "prepare_timeline_gpu_events": "holotrace.compat.timeline",
    "plot_timeline_gpu_kernels": "holotrace.compat.timeline",
    "plot_timeline_gpu_kernels_from_trace": "holotrace.compat.timeline",
    "load_execution_trace": "holotrace.compat.execution_trace",
    "correlate_execution_trace": "holotrace.compat.execution_trace",
    "add_et_column": "holotrace.compat.execution_trace",
    "GroupingPattern": "holotrace.compat.types",
    "shorten_name": "holotrace.compat.types",
    "get_kernel_type": "holotrace.compat.types",
    "get_memory_kernel_type": "holotrace.compat.types",
    "merge_kernel_intervals": "holotrace.compat.types",
    "flatten_column_names": "holotrace.compat.types",
    "ParserConfig": "holotrace.compat.configs",
    "ParserBackend": "holotrace.compat.configs",
    "TraceType": "holotrace.compat.configs",
    "HtaConfig": "holotrace.compat.configs",
    "NameStringColumnFilter": "holotrace.compat.filters",
    "NameIdColumnFilter": "holotrace.compat.filters",
    "CriticalPathAnalysis": "holotrace.compat.critical_path_analysis",
    "CPNode": "holotrace.compat.cp_graph",
    "CPEdge": "holotrace.compat.cp_graph",
    "CPEdgeType": "holotrace.compat.cp_graph",
    "BoundType": "holotrace.compat.cp_graph",
    "get_cpu_gpu_correlation": "holotrace.compat.helpers",
    "decode_symbol_id_to_symbol_name": "holotrace.compat.helpers",
    "trace_event_timestamp_to_unixtime_ns": "holotrace.compat.helpers",
    "parse_trace_file": "holotrace.compat.helpers",
    "normalize_path": "holotrace.compat.helpers",
    "get_mp_pool_size": "holotrace.compat.helpers",
    "get_value_from_dict": "holotrace.compat.helpers",
    "infer_device_type": "holotrace.compat.types",
    "TraceDiff": "holotrace.compat.trace_diff",
    "LabeledTrace": "holotrace.compat.trace_diff",
    "DeviceType": "holotrace.compat.types",
    "Filter": "holotrace.compat.filters",
    "IterationFilter": "holotrace.compat.filters",
    "IterationIndexFilter": "holotrace.compat.filters",
    "FirstIterationFilter": "holotrace.compat.filters",
    "RankFilter": "holotrace.compat.filters",
    "TimeRangeFilter": "holotrace.compat.filters",
    "NameFilter": "holotrace.compat.filters",
    "GPUKernelFilter": "holotrace.compat.filters",
    "CPUOperatorFilter": "holotrace.compat.filters",
    "QueryFilter": "holotrace.compat.filters",
    "ZeroDurationFilter": "holotrace.compat.filters",
    "CompositeFilter": "holotrace.compat.filters",
    "MemCopyEventFilter": "holotrace.compat.filters",
    "OperatorFilterMethod": "holotrace.compat.filters",
    "UnderOperatorFilter": "holotrace.compat.filters",
    "AfterOperatorFilter": "holotrace.compat.filters",
    "BeforeOperatorFilter": "holotrace.compat.filters",
    "CombinedOperatorFilter": "holotrace.compat.filters",
    "CPGraph": "holotrace.compat.cp_graph",
    "restore_cpgraph": "holotrace.compat.cp_graph",
    "TimeSeriesTypes": "holotrace.compat.methods_counters",
    "transform_correlation_to_index": "holotrace.compat.hta_steps",
    "add_iteration": "holotrace.compat.hta_steps",
    "add_fwd_bwd_links": "holotrace.compat.hta_steps",
    "sort_events": "holotrace.compat.hta_steps",
    "is_events_sorted": "holotrace.compat.hta_steps",
    "CUDA_MAX_LAUNCH_QUEUE_PER_STREAM": "holotrace.compat.trace_df",
    "MAX_EVENT_DURATION_US": "holotrace.compat.trace_df",
    "get_iterations": "holotrace.compat.trace_df",
    "find_op_occurrence": "holotrace.compat.trace_df",
    "find_events_by_name_patterns_using_symbol_table": "holotrace.compat.trace_df",
    "find_events_by_name_patterns_using_decoded_names": "holotrace.compat.trace_df",
    "create_rank_to_trace_dict_from_dir": "holotrace.compat.trace_io",
    "create_rank_to_trace_dict": "holotrace.compat.trace_io",
    "get_trace_files": "holotrace.compat.trace_io",
    "read_trace": "holotrace.compat.trace_io",
    "write_trace": "holotrace.compat.trace_io",
    "update_trace_rank": "holotrace.compat.trace_io",
    "PHASE_COUNTER": "holotrace.compat.raw_trace",
    "PHASE_FLOW_START": "holotrace.compat.raw_trace",
    "PHASE_FLOW_END": "holotrace.compat.raw_trace",
    "CUDA_SASS_INSTRUCTION_COUNTER_FLOPS": "holotrace.analysis.cupti",
}

__all__ = ["HolotraceError", "__version__", *_LAZY]


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'holotrace' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
