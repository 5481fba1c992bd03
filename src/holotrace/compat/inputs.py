"""What HTA's constructor accepts (a folder, a ``{rank: file}`` map, a list of files), loaded."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

__all__ = ["load_inputs"]


def load_inputs(
    trace_files, trace_dir: str, *, cache: bool, workers: Optional[int], strict: bool, all_args: bool = False
):
    """Load what HTA's constructor names: a rank→file map, a list of files, or a folder."""
    from holotrace.loader import load

    opts = {"cache": cache, "workers": workers, "strict": strict}
    if all_args:
        opts["all_args"] = True
    base = Path(trace_dir)
    if trace_files is None:
        return load(base, **opts)
    if isinstance(trace_files, dict):
        wanted = {int(r): _resolve(base, f) for r, f in trace_files.items()}
        job = load([wanted[r] for r in sorted(wanted)], **opts)
        return _rekey(job, wanted)
    if isinstance(trace_files, (list, tuple)):
        return load([_resolve(base, f) for f in trace_files], **opts)
    raise TypeError(f"trace_files must be a dict {{rank: file}} or a list of files, not {type(trace_files).__name__}")


def _resolve(base: Path, f: str) -> str:
    p = Path(f)
    return str(p if p.is_absolute() or p.exists() else base / p)


def _rekey(job, wanted: dict[int, str]):
    """Use the caller's rank numbers when an explicit ``{rank: file}`` map disagrees with the files."""
    from dataclasses import replace

    by_file = {str(Path(t.file).resolve()): r for r, t in job.traces.items()}
    mapping = {}
    for rank, f in wanted.items():
        r = by_file.get(str(Path(f).resolve()))
        if r is not None:
            mapping[r] = rank
    if all(k == v for k, v in mapping.items()):
        return job
    return replace(job, traces={mapping.get(r, r): t for r, t in job.traces.items()})
