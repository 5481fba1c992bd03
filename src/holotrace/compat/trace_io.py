"""HTA's trace-file helpers (``hta.common.trace_file``): which file holds which rank, read and write a trace.

These follow HTA's rule, not the loader's discovery: a file's rank is the first ``"rank": N`` in its text, read
line by line (HTA's expression); a file without one is rank 0 (holotrace's loader instead reads
``distributedInfo`` only, then a rank in the file name, then assigns an unused one), and a later file of a rank
replaces an earlier one, with a warning.
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import re
from typing import Any, Optional

from holotrace.compat.raw_trace import write_raw_trace
from holotrace.render.trace_file import read_trace_bytes

__all__ = [
    "create_rank_to_trace_dict_from_dir",
    "create_rank_to_trace_dict",
    "get_trace_files",
    "read_trace",
    "write_trace",
    "update_trace_rank",
]

log = logging.getLogger("holotrace.compat")
_RANK = re.compile(rb'"rank":\s+(\d+)')  # HTA's expression


def _hta_rank(path: str) -> Optional[int]:
    """The first ``"rank": N`` of the file, line by line (``None`` when there is none)."""
    opener = gzip.open if path.endswith("gz") else open
    with opener(path, "rb") as fh:
        for line in fh:
            m = _RANK.search(line)
            if m:
                return int(m.group(1))
    return None


def create_rank_to_trace_dict_from_dir(trace_dir: str) -> tuple[bool, dict[int, str]]:
    """``(ok, {rank: path})`` of the ``.gz``/``.json`` files of a folder (``ok`` False: unreadable or none)."""
    if not (os.path.exists(trace_dir) and os.access(trace_dir, os.R_OK)):
        log.error("trace_path %s doesn't exist or is not readable", trace_dir)
        return False, {}
    files = [os.path.join(trace_dir, f) for f in os.listdir(trace_dir) if f.endswith((".gz", ".json"))]
    if not files:
        log.warning("No trace file is found in %s", trace_dir)
        return False, {}
    return create_rank_to_trace_dict(files)


def create_rank_to_trace_dict(file_list: list[str]) -> tuple[bool, dict[int, str]]:
    """``(True, {rank: path})`` of the files (see the module)."""
    out: dict[int, str] = {}
    for path in file_list:
        rank = _hta_rank(path)
        if rank is None:
            log.warning("the trace file does not have the rank specified in it (%s): rank 0 is used", path)
            rank = 0
        if rank in out:
            log.warning("File %s and file %s has the same rank; %s is used for rank %d", out[rank], path, path, rank)
        out[rank] = path
    return True, out


def get_trace_files(trace_path: str) -> dict[int, str]:
    """``{rank: path}`` of a folder's traces (empty, with a warning, when there are none)."""
    if not os.path.exists(trace_path):
        log.warning("%s is not a valid path", trace_path)
        return {}
    ok, ranks = create_rank_to_trace_dict_from_dir(trace_path)
    return ranks if ok else {}


def read_trace(file_path: str) -> dict[str, Any]:
    """The trace document of a ``.gz`` or ``.json`` file."""
    if not file_path.endswith((".gz", ".json")):
        raise ValueError(f"trace_file ({file_path}) must end with '.gz' or 'json'")
    return json.loads(read_trace_bytes(file_path))


def write_trace(trace_data: dict[str, Any], file_path: str) -> None:
    """Write a trace document (its folder made if needed); gzip-compressed for ``.gz`` names."""
    base = os.path.dirname(file_path)
    if base:
        os.makedirs(base, exist_ok=True)
    write_raw_trace(file_path, trace_data)


def update_trace_rank(file_path: str, rank: int) -> None:
    """Set ``distributedInfo.rank`` in a trace file, rewriting it (HTA's function: it changes the file)."""
    data = read_trace(file_path)
    info = data.get("distributedInfo")
    data["distributedInfo"] = {**info, "rank": rank} if isinstance(info, dict) else {"rank": rank}
    write_trace(data, file_path)
