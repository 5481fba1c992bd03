"""HTA's call graphs: ``CallGraph`` / ``CallStackGraph`` (``hta.common.trace_call_graph``,
``hta.common.trace_call_stack``) and the legacy ``CallGraph`` of ``hta.common.call_stack``
(:class:`LegacyCallGraph`), all on holotrace's one call-stack builder
(:func:`holotrace.analysis.callstack.call_graph` and :mod:`holotrace.analysis.callstack_columns`).

As in HTA, building a :class:`CallGraph` writes the stack columns into the :class:`~holotrace.compat.trace.Trace`'s
rank tables (tables the analyses never read). Differences (docs/compatibility.md): ``last_kernel_end`` and
``kernel_span`` are on the aligned clock (HTA mixes an absolute end with an aligned start); negative durations
count as zero instead of raising; a thread with ``tid == 0`` keeps root id 0 as in HTA.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, Iterator, List, NamedTuple, Optional

import numpy as np
import pandas as pd

from holotrace.analysis.callstack import call_graph
from holotrace.analysis.callstack_columns import STACK_COLUMNS, stack_columns
from holotrace.model import classify
from holotrace.model.classify import HTA, HTA_FIXED

__all__ = ["CallGraph", "CallStackGraph", "CallStackIdentity", "CallStackNode", "LegacyCallGraph",
           "NON_EXISTENT_NODE_INDEX", "NULL_NODE_INDEX"]

NON_EXISTENT_NODE_INDEX = -2
NULL_NODE_INDEX = -1


class CallStackIdentity(NamedTuple):
    rank: int = -1
    pid: int = -1
    tid: int = -1


@dataclass
class CallStackNode:
    parent: int = NULL_NODE_INDEX
    depth: int = -1
    height: int = -1
    device: str = "CPU"
    children: List[int] = field(default_factory=list)


class CallStackGraph:
    """The call stack of one CPU thread (its nodes are event ``index`` values; the root is ``-|tid|``)."""

    def __init__(self, df: pd.DataFrame, identity: CallStackIdentity, nodes: Dict[int, CallStackNode],
                 root: int, full_df: pd.DataFrame):
        self.df, self.identity, self.nodes, self.root_index, self.full_df = df, identity, nodes, root, full_df

    def get_nodes(self) -> Dict[int, CallStackNode]:
        return self.nodes

    def get_parent(self, idx: int) -> int:
        node = self.nodes.get(idx)
        return node.parent if node is not None else NON_EXISTENT_NODE_INDEX

    def get_children(self, idx: int) -> List[int]:
        node = self.nodes.get(idx)
        return list(node.children) if node is not None else []

    def get_root(self, idx: int) -> int:
        while idx >= 0 and idx in self.nodes:
            idx = self.nodes[idx].parent
        return idx

    def get_path_to_root(self, idx: int) -> List[int]:
        if idx not in self.nodes:
            return []
        path = [idx]
        while path[-1] >= 0 and path[-1] in self.nodes:
            path.append(self.nodes[path[-1]].parent)
        return path

    def get_descendants(self, idx: int, include_gpu_kernel: bool = False) -> List[int]:
        out, todo = [], [idx]
        while todo:
            i = todo.pop()
            out.append(i)
            todo.extend(c for c in self.get_children(i) if include_gpu_kernel or self.nodes[c].device != "GPU")
        return out

    def get_leaf_nodes(self, idx: int, include_gpu_kernel: bool = False) -> List[int]:
        return [i for i in self.get_descendants(idx, include_gpu_kernel)
                if not [c for c in self.get_children(i) if include_gpu_kernel or self.nodes[c].device != "GPU"]]

    def get_paths_to_leaves(self, idx: int, include_cuda_kernel: bool = False) -> List[List[int]]:
        paths, todo = [], [[idx]]
        while todo:
            p = todo.pop()
            kids = [c for c in self.get_children(p[-1]) if include_cuda_kernel or self.nodes[c].device != "GPU"]
            if kids:
                todo.extend(p + [c] for c in reversed(kids))
            else:
                paths.append(p)
        return paths

    def get_dataframe(self) -> pd.DataFrame:
        return self.df

    def get_depth(self) -> pd.Series:
        return self.df["depth"]

    def dfs_traverse(self, enter_func: Callable[[int, CallStackNode], None],
                     exit_func: Callable[[int, CallStackNode], None]) -> None:
        stack = [(self.root_index, False)]
        while stack:
            i, done = stack.pop()
            node = self.nodes.get(i, CallStackNode())
            if done:
                exit_func(i, node)
                continue
            enter_func(i, node)
            stack.append((i, True))
            stack.extend((c, False) for c in reversed(node.children))


class CallGraph:
    """HTA's ``CallGraph`` over a :class:`~holotrace.compat.trace.Trace` (``analyzer.t``)."""

    stack_columns = list(STACK_COLUMNS)

    def __init__(self, trace, ranks: Optional[List[int]] = None, *, hta_compat: bool = True):
        self.trace_data = trace
        all_ranks = trace.get_ranks()
        self.ranks = [r for r in ranks if r in all_ranks] if ranks else all_ranks
        if not self.ranks:
            raise ValueError("No rank was found for the trace.")
        self._rules = HTA if hta_compat else HTA_FIXED
        self.rank_to_stacks: Dict[int, Dict[CallStackIdentity, CallStackGraph]] = {}
        self.rank_to_nodes: Dict[int, Dict[int, CallStackNode]] = {}
        self.call_stacks: List[CallStackGraph] = []
        rows = []
        for rank in self.ranks:
            rows.extend(self._build(rank))
        self.mapping = pd.DataFrame(rows, columns=["rank", "pid", "tid", "label", "stack_index", "stack_root", "count"])
        if len(self.mapping):
            self.mapping["count"] = self.mapping.groupby(["rank", "stack_root"]).cumcount() + 1
        self._cached_rank = self.ranks[0]

    def _build(self, rank: int) -> list:
        view = self.trace_data.view
        rv = view[rank]
        g = call_graph(view, rank, rules=self._rules)
        cols = stack_columns(g, rv)
        df = self.trace_data.traces[rank]
        if "end" not in df.columns:
            df["end"] = df["ts"] + df["dur"]
        for c in STACK_COLUMNS:  # HTA writes them into the rank's table
            df[c] = cols[c]
        index, parent = rv["index"], cols["parent"]
        nodes: Dict[int, CallStackNode] = {}
        members = np.flatnonzero(g.in_graph)
        devices = np.where(g.is_kernel, "GPU", "CPU")
        for i, p, d, h, dev in zip(index[members].tolist(), parent[members].tolist(), cols["depth"][members].tolist(),
                                   cols["height"][members].tolist(), devices[members].tolist()):
            nodes[i] = CallStackNode(p, d, h, dev, [])
        for i in index[members].tolist():  # children in row order
            p = nodes[i].parent
            if p not in nodes:
                nodes[p] = CallStackNode(NULL_NODE_INDEX, -1, -1, "CPU", [])
            nodes[p].children.append(i)
        self.rank_to_nodes[rank] = nodes
        stacks: Dict[CallStackIdentity, CallStackGraph] = {}
        rows = []
        cpu = g.in_graph & ~g.is_kernel
        names = self.trace_data.symbol_table.sym_table
        for pid, tid in pd.unique(pd.MultiIndex.from_arrays([rv["pid"][cpu], rv["tid"][cpu]])).tolist():
            sel = cpu & (rv["pid"] == pid) & (rv["tid"] == tid)
            ident = CallStackIdentity(rank, int(pid), int(tid))
            rows_idx = index[sel]
            root = int(rows_idx[0]) if rows_idx.size else -abs(int(tid))
            while root >= 0 and root in nodes:  # the backward thread's root is the main root once linked
                root = nodes[root].parent
            stacks[ident] = csg = CallStackGraph(df.loc[rows_idx], ident, nodes, root, df)
            self.call_stacks.append(csg)
            thread_names = [names[i] if i >= 0 else "" for i in rv["name"][sel].tolist()]
            label = ("main" if any(classify.is_step_range_name(s) for s in thread_names) else
                     "bwd" if any(classify.is_autograd_name(s) for s in thread_names) else
                     (thread_names[0] if thread_names else "empty"))
            rows.append((rank, int(pid), int(tid), label, len(self.call_stacks) - 1, root, 1))
        self.rank_to_stacks[rank] = stacks
        return rows

    # ------------------------------------------------------------------ queries
    def _rank(self, rank) -> int:
        if rank:
            self._cached_rank = rank
        return self._cached_rank

    def get_call_stacks(self, rank=None, pid=None, tid=None, stack_index=None) -> Iterator[CallStackGraph]:
        m = self.mapping
        for col, v in (("rank", rank), ("pid", pid), ("tid", tid), ("stack_index", stack_index)):
            if v is not None:
                m = m[m[col] == v]
        return (self.call_stacks[i] for i in m["stack_index"].tolist())

    def get_node_attributes(self, index: int, rank=None) -> pd.Series:
        df = self.trace_data.traces[self._rank(rank)]
        rows = df[df["index"] == index]
        if rows.empty:
            raise ValueError(f"invalid node index - {index}")
        return rows.squeeze()

    def get_csg_of_node(self, index: int, rank=None) -> CallStackGraph:
        row = self.get_node_attributes(index, rank)
        if row["stream"] > 0:
            row = self.get_node_attributes(int(row["parent"]), rank)
        return self.rank_to_stacks[self._cached_rank][CallStackIdentity(self._cached_rank, int(row["pid"]),
                                                                        int(row["tid"]))]

    def get_stack_of_node(self, index: int, rank=None, skip_ancestors: bool = False,
                          include_gpu_kernels: bool = True) -> pd.DataFrame:
        """Rows of the node's descendants and (unless ``skip_ancestors``) its ancestors, sorted by ``ts``.

        ``include_gpu_kernels=True`` is HTA's behaviour (its CPU-only guard does not apply below the start node).
        """
        row = self.get_node_attributes(index, rank)
        df = self.trace_data.traces[self._cached_rank]
        if row["stream"] > 0:
            ids = [index]
        else:
            csg = self.get_csg_of_node(index, rank)
            ids = csg.get_descendants(index, include_gpu_kernel=include_gpu_kernels)
            if not skip_ancestors:
                ids += csg.get_path_to_root(index)[1:]
        ids = [i for i in dict.fromkeys(ids) if i >= 0]
        return df.loc[ids].sort_values("ts").copy()

    def get_gpu_kernels(self, rank=None) -> pd.DataFrame:
        df = self.trace_data.traces[self._rank(rank)]
        return df[df["stream"] != -1]

    @classmethod
    def from_dataframe(cls, df: pd.DataFrame, symbol_table=None, rank: int = -1) -> "CallGraph":
        raise NotImplementedError("CallGraph.from_dataframe: build from a loaded trace instead "
                                  "(CallGraph(TraceAnalysis(...).t))")


class LegacyCallGraph(CallGraph):
    """HTA's older ``hta.common.call_stack.CallGraph`` (used by its critical-path analysis): the same stacks,
    with that module's columns — ``depth`` (−1 for device rows, NaN outside any stack) and ``parent`` (−1 at top
    level; device rows: their ``index_correlation``)."""

    def __init__(self, trace, ranks: Optional[List[int]] = None, filter_func=None, remapped_tids=None,
                 pre_process_trace_data: bool = False):
        super().__init__(trace, ranks)
        for rank in self.ranks:
            df = trace.traces[rank]
            parent = df["parent"].to_numpy().copy()
            parent[parent < -1] = -1
            gpu = df["stream"].to_numpy() != -1
            parent[gpu] = df["index_correlation"].to_numpy()[gpu]
            depth = df["depth"].to_numpy().copy()
            depth[gpu] = -1
            df["parent"], df["depth"] = parent, depth
        self.mapping = self.mapping[["rank", "pid", "tid"]].assign(csg_index=self.mapping["stack_index"]) \
            .set_index(["rank", "pid", "tid"])
