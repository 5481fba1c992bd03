"""HTA's critical-path methods: ``critical_path_analysis`` and ``overlay_critical_path_analysis`` (spec 25)."""

from __future__ import annotations

import os
from typing import Optional, Union

from holotrace.analysis import critical_path as _cp
from holotrace.compat.facade_base import FacadeBase, log

__all__ = ["CriticalPathMethods"]


class CriticalPathMethods(FacadeBase):
    def critical_path_analysis(
        self,
        rank: int,
        annotation: str,
        instance_id: Union[Optional[int], tuple[int, int]],
        data_load_events: Optional[list[str]] = None,
        hta_compat: Optional[bool] = None,
    ):
        """``(CPGraph, success)`` for ``rank`` in the window of ``annotation``'s instance(s) (``""``: whole rank);
        None when no name contains ``annotation`` or ``instance_id`` has another type. An instance index out of
        range raises ``ValueError`` naming the available count."""
        from holotrace.compat.cp_graph import CPGraph

        if instance_id is not None and not isinstance(instance_id, (int, tuple)):
            log.error("Unexpected input type instance_id")
            return None
        if self.job.strings.id("cuda_sync") < 0:
            log.warning(
                "Trace does not contain CUDA Synchronization events so the results of analysis could be inaccurate."
            )
        try:
            cp = _cp.critical_path(
                self.view,
                rank=rank,
                annotation=annotation,
                instance=instance_id,
                rules=self._rules(hta_compat),
                data_load_events=data_load_events,
            )
        except LookupError:
            log.error("Could not find annotation %s in the trace.", annotation)
            return None
        graph = CPGraph(cp, rank)
        return graph, bool(cp.success)

    def overlay_critical_path_analysis(
        self,
        rank: int,
        critical_path_graph,
        output_dir: str,
        only_show_critical_events: bool = True,
        show_all_edges: bool = False,
    ) -> str:
        """Write the rank's trace with the critical path overlaid into ``output_dir``; returns the file path
        (``""`` when ``output_dir`` exists and is not a folder)."""
        from holotrace.render.critical_path_overlay import overlay_path

        out = os.path.expanduser(output_dir)
        if os.path.exists(out) and not os.path.isdir(out):
            log.error("%s: exists and is not a folder; pass a folder for the overlaid trace", out)
            return ""
        return overlay_path(
            critical_path_graph.cp,
            self.job.rank(rank).file,
            out,
            only_critical=only_show_critical_events,
            show_all_edges=show_all_edges,
        )
