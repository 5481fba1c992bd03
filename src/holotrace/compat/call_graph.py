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

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple, Optional

import numpy as np
import pandas as pd

from holotrace.analysis.callstack import call_graph
from holotrace.analysis.callstack_columns import STACK_COLUMNS, stack_columns
from holotrace.compat.call_graph_frame import frame_graph
from holotrace.model import classify
from holotrace.model.classify import HTA, HTA_FIXED

__all__ = [
    "CallGraph",
    "CallStackGraph",
    "CallStackIdentity",
    "CallStackNode",
    "LegacyCallGraph",
    "NON_EXISTENT_NODE_INDEX",
    "NULL_NODE_INDEX",
]

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
    children: list[int] = field(default_factory=list)


class CallStackGraph:
    """The call stack of one CPU thread (its nodes are event ``index`` values; the root is ``-|tid|``).

    ``CallStackGraph(df, identity, cpu_gpu_correlation, full_df, symbol_table, nodes=None,
    use_existing_stack_columns=True, save_call_stack_to_df=True)`` is HTA's constructor: ``df`` is the thread's
    rows of ``full_df``; kernels hang under the launch named by ``cpu_gpu_correlation`` (``gpu_index``,
    ``cpu_index``); ``nodes`` may be shared between threads; the stack's ``parent``/``depth``/``height`` are
    written into ``full_df`` unless ``save_call_stack_to_df=False``. With ``use_existing_stack_columns`` and
    valid ``parent``/``depth``/``height`` columns in ``full_df``, the stack is read from them.
    """

    def __init__(
        self,
        df: pd.DataFrame,
        identity: CallStackIdentity,
        cpu_gpu_correlation: pd.DataFrame,
        full_df: pd.DataFrame,
        symbol_table=None,
        nodes: Optional[dict[int, CallStackNode]] = None,
        use_existing_stack_columns: bool = True,
        save_call_stack_to_df: bool = True,
    ) -> None:
        self.df, self.identity, self.full_df = df, identity, full_df
        self.correlations, self.symbol_table = cpu_gpu_correlation, symbol_table
        self.nodes: dict[int, CallStackNode] = nodes if nodes is not None else {}
        self.root_index = -abs(_plain(identity.tid)) if isinstance(_plain(identity.tid), int) else NULL_NODE_INDEX
        self.nodes.setdefault(self.root_index, CallStackNode(NULL_NODE_INDEX, -1, -1, "CPU", []))
        if "end" not in full_df.columns:
            full_df["end"] = full_df["ts"] + full_df["dur"]
        if use_existing_stack_columns and self._has_valid_stack_columns():
            self._read_stack_columns()
            return
        self._build_from_frame()
        if save_call_stack_to_df:
            self.save_call_stack_to_dataframe()

    @classmethod
    def _of(
        cls,
        df: pd.DataFrame,
        identity: CallStackIdentity,
        nodes: dict[int, CallStackNode],
        root: int,
        full_df: pd.DataFrame,
    ) -> CallStackGraph:
        """A stack over nodes already built by :class:`CallGraph`."""
        self = cls.__new__(cls)
        self.df, self.identity, self.nodes, self.root_index, self.full_df = df, identity, nodes, root, full_df
        self.correlations, self.symbol_table = None, None
        return self

    def _has_valid_stack_columns(self) -> bool:
        cols = ("parent", "depth", "height")
        if not set(cols) <= set(self.full_df.columns) or self.df.empty:
            return False
        part = self.full_df.loc[self.df.index, list(cols)]
        return not part.isna().any().any() and not (part["parent"] == NULL_NODE_INDEX).all()

    def _read_stack_columns(self) -> None:
        rows = self.full_df.loc[self.df.index]
        children: dict[int, list[int]] = {}
        for i, p in zip(self.full_df["index"].tolist(), self.full_df["parent"].tolist()):
            children.setdefault(int(p), []).append(int(i))
        for i, p, d, h in zip(
            rows["index"].tolist(), rows["parent"].tolist(), rows["depth"].tolist(), rows["height"].tolist()
        ):
            self.nodes[int(i)] = CallStackNode(int(p), int(d), int(h), "CPU", children.get(int(i), []))

    def _build_from_frame(self) -> None:
        """Nest the thread's rows (and the kernels the correlation hangs under them) with the one builder."""
        corr = self.correlations
        given = {"pid": self.identity.pid, "tid": self.identity.tid, "name": -1}  # HTA needs none of these here
        part = self.df.assign(**{c: v for c, v in given.items() if c not in self.df.columns})
        if corr is not None and len(corr):  # the thread's rows, as given (HTA nests ``df``), and their kernels
            launched = corr[corr["cpu_index"].isin(self.df["index"])]["gpu_index"]
            extra = (self.full_df["index"].isin(launched) & ~self.full_df["index"].isin(self.df["index"])).to_numpy()
            if extra.any():
                part = pd.concat([part, self.full_df[extra]])
        g, cols, a = frame_graph(part, self.symbol_table, correlation=corr, link_backward=False)
        index = a["index"]
        members = np.flatnonzero(g.in_graph)
        parent = np.where(g.parent >= 0, index[np.clip(g.parent, 0, None)], self.root_index)
        for i, p, d, h, k in zip(
            index[members].tolist(),
            parent[members].tolist(),
            cols["depth"][members].tolist(),
            cols["height"][members].tolist(),
            g.is_kernel[members].tolist(),
        ):
            self.nodes[i] = CallStackNode(p, d, h, "GPU" if k else "CPU", [])
        for i in index[members].tolist():
            self.nodes.setdefault(self.nodes[i].parent, CallStackNode(NULL_NODE_INDEX, -1, -1, "CPU", []))
            self.nodes[self.nodes[i].parent].children.append(i)

    def save_call_stack_to_dataframe(self, apply_whole_graph: bool = False) -> None:
        """Recompute depth and height from the nodes (after re-parenting) and write ``parent``, ``depth`` and
        ``height`` of every node into ``full_df`` (``apply_whole_graph``: from every root of the shared node
        map, else from this stack's root)."""
        roots = (
            [i for i, n in self.nodes.items() if i < 0 or n.parent not in self.nodes]
            if apply_whole_graph
            else [self.root_index]
        )
        for r in roots:
            self._set_depth_height(r, -1 if r < 0 else self.nodes[r].depth)
        keep = [i for i in self.nodes if i >= 0 and i in self.full_df.index]
        for col, dtype in (("parent", "Int64"), ("depth", "Int16"), ("height", "Int16")):  # HTA's stack dtypes
            if col not in self.full_df.columns:
                self.full_df[col] = pd.array([-1] * len(self.full_df), dtype=dtype)
            self.full_df.loc[keep, col] = [getattr(self.nodes[i], col) for i in keep]

    def _set_depth_height(self, root: int, depth: int) -> int:
        """Iterative DFS: depth top-down, height bottom-up (kernel 0, CPU node ``max(1, 1 + child)``)."""
        stack = [(root, depth, False)]
        while stack:
            i, d, done = stack.pop()
            node = self.nodes.get(i)
            if node is None:
                continue
            if done:
                kids = [self.nodes[c].height for c in node.children if c in self.nodes]
                node.height = 0 if node.device == "GPU" else max([1] + [h + 1 for h in kids])
                continue
            node.depth = d
            stack.append((i, d, True))
            stack.extend((c, d + 1, False) for c in node.children)
        return self.nodes[root].height if root in self.nodes else -1

    def update_parent_of_first_layer_nodes(self, new_parent_index: int) -> None:
        """Move the first-layer nodes of this stack that lie within ``[ts, end]`` of ``new_parent_index`` under
        it (HTA links the backward thread's operators under the main thread's backward annotation this way);
        a parent left without children is removed, and the root follows the new parent's root."""
        if new_parent_index not in self.nodes:
            raise ValueError(f"{new_parent_index} not in the node map self.nodes")
        if new_parent_index not in self.full_df.index:
            raise ValueError(f"{new_parent_index} not in the self.full_df")
        row = self.full_df.loc[self.full_df["index"] == new_parent_index].iloc[0]
        ts, end = row["ts"], row["end"]
        first = self.full_df[
            self.full_df["index"].isin(self.nodes[self.root_index].children)
            & (self.full_df["ts"] >= ts)
            & (self.full_df["end"] <= end)
        ]["index"].tolist()
        target = self.nodes[new_parent_index]
        moved = [i for i in dict.fromkeys(first) if i in self.nodes and i not in target.children]
        old = {self.nodes[i].parent for i in moved}
        for i in moved:
            self.nodes[i].parent = new_parent_index
        target.children.extend(moved)
        for p in old:
            self.nodes[p].children = [c for c in self.nodes[p].children if c not in set(moved)]
            if not self.nodes[p].children:
                del self.nodes[p]
        if self.root_index not in self.nodes:
            self.root_index = self.get_root(new_parent_index)

    def __repr__(self) -> str:
        return "CallStackGraph\n" + "".join(f"    {k}: {v}\n" for k, v in self.nodes.items())

    def get_nodes(self) -> dict[int, CallStackNode]:
        return self.nodes

    def get_parent(self, idx: int) -> int:
        node = self.nodes.get(idx)
        return node.parent if node is not None else NON_EXISTENT_NODE_INDEX

    def get_children(self, idx: int) -> list[int]:
        node = self.nodes.get(idx)
        return list(node.children) if node is not None else []

    def get_root(self, idx: int) -> int:
        while idx >= 0 and idx in self.nodes:
            idx = self.nodes[idx].parent
        return idx

    def get_path_to_root(self, idx: int) -> list[int]:
        if idx not in self.nodes:
            return []
        path = [idx]
        while path[-1] >= 0 and path[-1] in self.nodes:
            path.append(self.nodes[path[-1]].parent)
        return path

    def get_descendants(self, idx: int, include_gpu_kernel: bool = False) -> list[int]:
        out, todo = [], [idx]
        while todo:
            i = todo.pop()
            out.append(i)
            todo.extend(c for c in self.get_children(i) if include_gpu_kernel or self.nodes[c].device != "GPU")
        return out

    def get_leaf_nodes(self, idx: int, include_gpu_kernel: bool = False) -> list[int]:
        return [p[-1] for p in self.get_paths_to_leaves(idx, include_gpu_kernel)]

    def get_paths_to_leaves(self, idx: int, include_cuda_kernel: bool = False) -> list[list[int]]:
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
        """Depth of the thread's rows: from ``full_df`` when it has the column, else from the nodes."""
        if "depth" in self.full_df.columns:
            return self.full_df.loc[self.df["index"]]["depth"]
        depth = {i: n.depth for i, n in self.nodes.items() if i >= 0}
        return pd.Series(depth, name="depth", dtype=pd.Int16Dtype()).loc[self.df["index"]]

    def dfs_traverse(
        self, enter_func: Callable[[int, CallStackNode], None], exit_func: Callable[[int, CallStackNode], None]
    ) -> None:
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

    def __init__(self, trace, ranks: Optional[list[int]] = None, *, hta_compat: bool = True):
        self.trace_data = trace
        all_ranks = trace.get_ranks()
        self.ranks = [r for r in ranks if r in all_ranks] if ranks else all_ranks
        if not self.ranks:
            raise ValueError("No rank was found for the trace.")
        self._rules = HTA if hta_compat else HTA_FIXED
        self.rank_to_stacks: dict[int, dict[CallStackIdentity, CallStackGraph]] = {}
        self.rank_to_nodes: dict[int, dict[int, CallStackNode]] = {}
        self.call_stacks: list[CallStackGraph] = []
        rows = []
        for rank in self.ranks:
            rows.extend(self._build(rank))
        self.mapping = pd.DataFrame(rows, columns=["rank", "pid", "tid", "label", "stack_index", "stack_root", "count"])
        if len(self.mapping):
            self.mapping["count"] = self.mapping.groupby(["rank", "stack_root"]).cumcount() + 1
        self._cached_rank = self.ranks[0]

    def _graph(self, rank: int, df: pd.DataFrame):
        """The graph of one rank: from the Trace's view when ``df`` holds the view's rows in its order (a
        loaded trace), otherwise from the frame itself (parsed traces, ``from_dataframe``)."""
        view = getattr(self.trace_data, "view", None)
        if view is not None and rank in view.ranks:
            rv = view[rank]
            if rv.n == len(df) and np.array_equal(rv["index"], df["index"].to_numpy()):
                g = call_graph(view, rank, rules=self._rules)
                return g, stack_columns(g, rv), rv
        g, cols, arrays = frame_graph(df, self.trace_data.symbol_table, hta_quirks=self._rules.hta_quirks)
        return g, cols, arrays

    def _build(self, rank: int) -> list:
        df = self.trace_data.traces[rank]
        g, cols, rv = self._graph(rank, df)
        if "end" not in df.columns:
            df["end"] = df["ts"] + df["dur"]
        for c in STACK_COLUMNS:  # HTA writes them into the rank's table
            df[c] = cols[c]
        index, parent = rv["index"], cols["parent"]
        nodes: dict[int, CallStackNode] = {}
        members = np.flatnonzero(g.in_graph)
        devices = np.where(g.is_kernel, "GPU", "CPU")
        for i, p, d, h, dev in zip(
            index[members].tolist(),
            parent[members].tolist(),
            cols["depth"][members].tolist(),
            cols["height"][members].tolist(),
            devices[members].tolist(),
        ):
            nodes[i] = CallStackNode(p, d, h, dev, [])
        for i in index[members].tolist():  # children in row order
            p = nodes[i].parent
            if p not in nodes:
                nodes[p] = CallStackNode(NULL_NODE_INDEX, -1, -1, "CPU", [])
            nodes[p].children.append(i)
        self.rank_to_nodes[rank] = nodes
        stacks: dict[CallStackIdentity, CallStackGraph] = {}
        rows = []
        cpu = g.in_graph & ~g.is_kernel
        names = self.trace_data.symbol_table.sym_table
        threads = pd.unique(pd.MultiIndex.from_arrays([rv["pid"][cpu], rv["tid"][cpu]])).tolist()
        for pid, tid in sorted(threads, key=lambda x: (str(type(x[0])), x[0], str(type(x[1])), x[1])):  # HTA's groupby
            sel = cpu & (rv["pid"] == pid) & (rv["tid"] == tid)
            ident = CallStackIdentity(rank, _plain(pid), _plain(tid))
            rows_idx = index[sel]
            root = int(rows_idx[0]) if rows_idx.size else NULL_NODE_INDEX
            while root >= 0 and root in nodes:  # the backward thread's root is the main root once linked
                root = nodes[root].parent
            stacks[ident] = csg = CallStackGraph._of(df.loc[rows_idx], ident, nodes, root, df)
            self.call_stacks.append(csg)
            thread_names = [
                (names[i] if 0 <= i < len(names) else "") if isinstance(i, int) else str(i)
                for i in rv["name"][sel].tolist()
            ]
            label = (
                "main"
                if any(classify.is_step_range_name(s) for s in thread_names)
                else "bwd"
                if any(classify.is_autograd_name(s) for s in thread_names)
                else (thread_names[0] if thread_names else "empty")
            )
            rows.append((rank, _plain(pid), _plain(tid), label, len(self.call_stacks) - 1, root, 1))
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
        return self.rank_to_stacks[self._cached_rank][
            CallStackIdentity(self._cached_rank, int(row["pid"]), int(row["tid"]))
        ]

    def get_stack_of_node(
        self, index: int, rank=None, skip_ancestors: bool = False, include_gpu_kernels: bool = True
    ) -> pd.DataFrame:
        """Rows of the node, its descendants and (unless ``skip_ancestors``) its ancestors, sorted by ``ts``.

        For a GPU kernel: the kernel and the CPU call stack that launched it (launch call → operators → root).
        ``include_gpu_kernels=True`` is HTA's behaviour (its CPU-only guard does not apply below the start node).
        """
        row = self.get_node_attributes(index, rank)
        df = self.trace_data.traces[self._cached_rank]
        csg = self.get_csg_of_node(index, rank)
        if row["stream"] > 0:
            ids = [index]
            if not skip_ancestors:
                ids += csg.get_path_to_root(int(row["parent"]))
        else:
            ids = csg.get_descendants(index, include_gpu_kernel=include_gpu_kernels)
            if not skip_ancestors:
                ids += csg.get_path_to_root(index)[1:]
        ids = [i for i in dict.fromkeys(ids) if i >= 0]
        return df.loc[ids].sort_values("ts").copy()

    def get_gpu_kernels(self, rank=None) -> pd.DataFrame:
        df = self.trace_data.traces[self._rank(rank)]
        return df[df["stream"] != -1]

    @staticmethod
    def from_dataframe(df: pd.DataFrame, symbol_table=None, rank: int = -1) -> CallGraph:
        """A CallGraph of one rank's rows (``name``/``cat`` ids into ``symbol_table``; default: a table made
        from the frame's text ``name``/``cat`` columns, as HTA). ``df`` is copied; the copy gets the columns."""
        from holotrace.compat.trace import Trace, TraceSymbolTable

        t = Trace(trace_files={}, trace_dir="")
        t.symbol_table = symbol_table if symbol_table is not None else TraceSymbolTable.create_from_df(df)
        t.traces[rank] = df.copy()
        t.is_parsed = True
        return CallGraph(t)


def _plain(v):
    """A thread id as HTA keeps it: an int when numeric, else the value itself."""
    try:
        return int(v)
    except (TypeError, ValueError):
        return v


class LegacyCallGraph(CallGraph):
    """HTA's older ``hta.common.call_stack.CallGraph`` (used by its critical-path analysis): the same stacks,
    with that module's columns — ``depth`` (−1 for device rows, NaN outside any stack) and ``parent`` (−1 at top
    level; device rows: their ``index_correlation``)."""

    def __init__(
        self,
        trace,
        ranks: Optional[list[int]] = None,
        filter_func=None,
        remapped_tids=None,
        pre_process_trace_data: bool = False,
    ):
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
        self.mapping = (
            self.mapping[["rank", "pid", "tid"]]
            .assign(csg_index=self.mapping["stack_index"])
            .set_index(["rank", "pid", "tid"])
        )
