"""A file's string-id columns renumbered into the job's string table when a job is assembled from its files."""

from __future__ import annotations

import os
import shutil
from typing import Optional

import numpy as np

from holotrace.ingest.store import PackedWriter, SpillError, open_packed, temp_folder
from holotrace.schema import ID_COLUMNS

__all__ = ["holding_moved", "renumber"]


def holding_moved(tables: dict, moved: np.ndarray, used: Optional[dict]) -> dict[str, list[str]]:
    """{table: id columns holding an id that ``moved``}: from the file's id masks (known since decoding, kept in
    the cache: no column is read), else (an entry without them) every column holding any id."""
    out: dict[str, list[str]] = {}
    for t, ids in ID_COLUMNS.items():
        for c in ids:
            if c not in tables[t]:
                continue
            mask = None if used is None else used.get(t, {}).get(c)
            if mask is not None and len(mask) == len(moved):
                hit = bool(moved[mask].any())
            else:
                hit = int(tables[t][c].max(initial=-1)) >= 0
            if hit:
                out.setdefault(t, []).append(c)
    return out


_IN_MEMORY_ROWS = 1 << 16  # columns this short are renumbered on the heap; longer ones into a mapped file


def renumber(tables: dict, remap: np.ndarray, n_job: int, todo: dict[str, list[str]]) -> None:
    """Replace a file's string-id columns named in ``todo`` by the job's ids (-1 stays -1), in the smallest type:
    short columns on the heap, the others written in chunks into a packed file of their own and mapped."""
    lut = np.append(remap, -1).astype(np.int16 if n_job < 2**15 else np.int32)  # id -1 reads the last slot
    big = {}
    for t, cols in todo.items():
        for c in cols:
            ids = tables[t][c]
            if len(ids) <= _IN_MEMORY_ROWS:
                tables[t][c] = lut[ids]
                tables[t][c].flags.writeable = False
            else:
                big.setdefault(t, {})[c] = (len(ids), lut.dtype)
    if not big:
        return
    step = 1 << 20
    folder = temp_folder()
    try:
        token = os.urandom(16)
        w = PackedWriter(folder / "renumbered", big, token)
        try:
            for t, cols in big.items():
                for c in cols:
                    ids = tables[t][c]
                    for a in range(0, len(ids), step):
                        w.write(t, c, a, lut[ids[a : a + step]])
        finally:
            layout = w.close()
        for t, cols in open_packed(folder / "renumbered", layout, token).items():
            tables[t].update(cols)
    except OSError as e:
        raise SpillError(e.errno, e.strerror or str(e), str(folder.parent)) from None
    finally:
        shutil.rmtree(folder, ignore_errors=True)  # the mapping keeps the data while it is used
