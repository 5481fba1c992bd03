"""HTA's user-annotation and straggler methods."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from holotrace.analysis import annotations as _anno
from holotrace.analysis import stragglers as _strag
from holotrace.compat.facade_base import FacadeBase, log
from holotrace.model.classify import HTA

__all__ = ["AnnotationMethods"]


class AnnotationMethods(FacadeBase):
    """HTA's user-annotation and straggler methods."""

    # ------------------------------------------------------------------ user annotations
    def get_gpu_kernels_with_user_annotations(
        self,
        rank: int,
        expand_names: bool = True,
        shorten_names: bool = True,
        hta_compat: bool | None = None,
    ) -> pd.DataFrame | None:
        """Every GPU operation of ``rank`` with the innermost GPU user annotation it runs under.

        Output: the rank table's GPU rows (kernels, memcpy/memset, stream syncs,
        ``Event Sync``/``Context Sync``) with ``end = ts + dur``, ``user_annotation``
        (name id, −1 for none) and, with ``expand_names``, ``s_name``, ``s_cat``,
        ``s_user_annotation`` (shortened with ``shorten_names``). ``None`` when
        the trace has no ``gpu_user_annotation`` events. Zero-duration operations
        are attributed to the annotation containing their start (HTA under
        pandas 3 never attributes them; ``hta_compat=True`` keeps that).
        """
        from holotrace.compat.hta_table import hta_table, text_column

        names = self.view[rank]["name"]
        if self.job.strings.id("gpu_user_annotation") < 0:
            log.warning("Trace for rank %s does not contain any GPU user annotations", rank)
            return None
        ops, ann = _anno.annotate_gpu_ops(self.view, rank, rules=self._rules(hta_compat))
        # HTA returns rows of its table, every column but the names: build just those rows
        out = hta_table(self.view[rank], self.job.strings, rows=ops).drop(columns=["s_name", "s_cat"])
        out = out.assign(
            end=out["ts"] + out["dur"], user_annotation=np.where(ann >= 0, names[np.clip(ann, 0, None)], -1)
        )
        cols = [c for c in out.columns if c != "end"]  # HTA's order: the corrected end right after dur
        out = out[cols[: cols.index("dur") + 1] + ["end"] + cols[cols.index("dur") + 1 :]]
        if expand_names:

            def text(ids):  # each distinct name decoded (and shortened) once
                return text_column(
                    *_anno.shortened_ids(self.job.strings, ids) if shorten_names else (self.job.strings, ids)
                )

            out = out.assign(
                s_name=text(names[ops]),
                s_cat=text(self.view[rank]["cat"][ops]),
                s_user_annotation=text(out["user_annotation"].to_numpy()),
            )
        return out.reset_index(drop=True)

    def get_gpu_user_annotation_breakdown(
        self,
        use_gpu_annotation: bool = True,
        visualize: bool = False,
        duration_ratio: float = 0.8,
        num_kernels: int = 1000,
        allowlist_patterns: list[str] | None = None,
        image_renderer: str | None = None,
        regex: bool = False,
    ) -> pd.DataFrame | None:
        """Time per user annotation per rank, top-k with ``others`` (HTA's aggregation, quirks kept).

        ``use_gpu_annotation``: GPU-timeline ranges (``gpu_user_annotation``);
        otherwise the CPU ranges (``user_annotation``, ``ProfilerStep#N`` included).
        ``allowlist_patterns`` are literal substrings as in HTA (whose
        documentation claims regular expressions); ``regex=True`` makes them
        regular expressions. ``None`` when the trace has no such annotations.
        """
        category = "gpu_user_annotation" if use_gpu_annotation else "user_annotation"
        if self.job.strings.id(category) < 0:
            log.warning("Trace does not contain any %s", category)
            return None
        allow = _anno.allowlisted_names(self.job.strings.table, allowlist_patterns, regex=regex)
        t = _anno.annotation_time(
            self.view,
            rules=HTA,
            gpu=use_gpu_annotation,
            num_kernels=num_kernels,
            duration_ratio=duration_ratio,
            allowlist=allow,
            sort="name",
        )
        out = pd.DataFrame(
            {
                "name": t["name"].astype("str"),  # pandas' text dtype, as HTA's frame
                **{
                    k: t[c].to_numpy()
                    for k, c in (
                        ("sum (us)", "sum_us"),
                        ("max (us)", "max_us"),
                        ("min (us)", "min_us"),
                        ("stddev", "std_us"),
                        ("mean (us)", "mean_us"),
                        ("rank", "rank"),
                    )
                },
            }
        )
        if visualize:
            self._figures(lambda p: p.annotation_pies(out), renderer=image_renderer or "")
        return out

    # ------------------------------------------------------------------ stragglers
    def get_potential_stragglers(
        self,
        profiler_steps: list[int] | None = None,
        num_candidates: int = 2,
        visualize: bool = False,
        straggler_identification_impl: Callable[..., pd.Series] | None = None,
        hta_compat: bool | None = None,
    ) -> list[int]:
        """Ranks most likely to hold the others back, most likely first (HTA's late-start method).

        Fixed by default: communication kernels are recognised by the shared
        rule table (``ncclDevKernel_*`` and every other family; HTA only knows
        ``ncclKernel*``), stream 0 and step 0 count, a trace without
        ``ProfilerStep`` annotations is analysed as one step, only ranks with a
        positive score are returned (ties by rank), and a job that cannot tell
        (one rank, no long collective) gives ``[]`` with a warning instead of an
        exception. ``straggler_identification_impl`` takes an HTA-style scorer
        ``f(df, symbol_table, k, visualize) -> Series``. See
        :func:`holotrace.analysis.stragglers.straggler_report` for who waits
        for whom, with evidence.

        Raises:
            ValueError: ``profiler_steps`` names no available step.
        """

        def hta_scorer(steps):  # HTA's scorer reads every rank's table, cut to the steps, stacked
            parts = []
            for r in self.view.ranks:
                t = self._table(r, args=False)
                t = t.assign(iteration=0) if steps is None else t[np.isin(t["iteration"].to_numpy(), steps)]
                parts.append(t.assign(rank=np.int64(r)))
            symbols = _strag.SymbolTableView(self.job.strings.table)
            return straggler_identification_impl(
                pd.concat(parts, ignore_index=True), symbols, max(int(num_candidates), 1), False
            )

        out = _strag.potential_stragglers(
            self.view,
            rules=self._rules(hta_compat),
            profiler_steps=profiler_steps,
            num_candidates=num_candidates,
            scorer=hta_scorer if straggler_identification_impl else None,
        )
        if visualize:
            self._figures(lambda p: p.stragglers_ranked(out))
        return out
