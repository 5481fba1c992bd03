"""HTA-compatible launch, aten-op delay, kernel-sequence, user-annotation and straggler methods.

Placeholder: the issue-4 helper fills :class:`LaunchAndAnnotationMethods`.

Contract with :class:`holotrace.compat.hta.TraceAnalysis` (the class that
inherits this mixin) — read-only state, nothing is mutated:

* ``self.job`` — the loaded :class:`holotrace.model.job.Job`;
* ``self.include_last_profiler_step`` — the constructor flag;
* ``self._frame(rank)`` — HTA's per-rank table (``hta_view.hta_frame``), cached;
* ``self._frames()`` — ``{rank: table}`` for every rank, ascending;
* ``self._ranks_arg(ranks)`` — HTA's ``None``/``[]`` → ``[0]`` rule, raising
  :class:`holotrace.errors.RankNotFoundError` for a rank that was not loaded;
* ``self._figures(method, build)`` — the ``visualize=True`` path (see ``hta.py``).
"""

from __future__ import annotations


class LaunchAndAnnotationMethods:
    """Mixin with HTA's launch/annotation/straggler methods (to be written for issue 4)."""
