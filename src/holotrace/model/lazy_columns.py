"""A rank view's columns: some held, the others made on first use and kept (:class:`Columns`)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from functools import partial
from typing import Optional

import numpy as np

__all__ = ["Columns"]


class Columns(Mapping):
    """Column name → numpy array, some made on first use: ``made`` holds the arrays, ``makers`` the functions
    that make the others (each called at most once; the array it returns is kept). ``together``: functions that
    make several columns at once (a dict), keyed by each column they make: the first read of any of them keeps them
    all, made once whichever threads ask (one waits for the other)."""

    __slots__ = ("_made", "_makers", "_keys", "_together", "_lock")

    def __init__(self, made: dict, makers: dict, order: Sequence[str] = (), together: Optional[dict] = None):
        self._made = dict(made)
        self._makers = dict(makers)
        self._together = dict(together or {})
        self._lock = threading.Lock() if self._together else None
        keys = self._made.keys() | self._makers.keys() | self._together.keys()
        self._keys = [k for k in order if k in keys] + sorted(keys - set(order))

    def __getitem__(self, key: str) -> np.ndarray:
        out = self._made.get(key)
        if out is None:
            make = self._makers.get(key)
            if make is None:
                return self._made_together(key)
            out = self._made.setdefault(key, make())  # two threads may race: the first array kept wins
        return out

    def _made_together(self, key: str) -> np.ndarray:
        if self._lock is None:
            raise KeyError(key)
        with self._lock:  # (another thread may be making them: it holds the lock until they are kept)
            if key not in self._made:
                make = self._together[key]  # (KeyError: no such column)
                for k, a in make().items():
                    if self._together.get(k) is make:
                        self._made.setdefault(k, a)
                        del self._together[k]
        return self._made[key]

    def is_made(self, key: str) -> bool:
        return key in self._made

    def forget(self, keep: Collection[str], remake: Callable[[str], np.ndarray]) -> None:
        """Let go of every array made but ``keep``'s; each is made again when read (by its maker, or by
        ``remake(key)``: the same values)."""
        for key in list(self._made):
            if key not in keep:
                self._makers.setdefault(key, partial(remake, key))  # (a column made with others: made alone)
                self._made.pop(key, None)
        for key in list(self._together):  # (not made yet: made alone too, and what the shared maker reads let go)
            self._makers.setdefault(key, partial(remake, key))
            del self._together[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key) -> bool:
        return key in self._made or key in self._makers or key in self._together

    def __reduce__(self):  # sent to another process: every column made, as a plain dict
        return dict, ([(k, self[k]) for k in self._keys],)
