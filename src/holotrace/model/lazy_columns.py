"""A rank view's columns: some held, the others made on first use and kept (:class:`Columns`)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from functools import partial

import numpy as np

__all__ = ["Columns"]


class Columns(Mapping):
    """Column name → numpy array, some made on first use: ``made`` holds the arrays, ``makers`` the functions
    that make the others (each called at most once; the array it returns is kept)."""

    __slots__ = ("_made", "_makers", "_keys")

    def __init__(self, made: dict, makers: dict, order: Sequence[str] = ()):
        self._made = dict(made)
        self._makers = dict(makers)
        keys = self._made.keys() | self._makers.keys()
        self._keys = [k for k in order if k in keys] + sorted(keys - set(order))

    def __getitem__(self, key: str) -> np.ndarray:
        out = self._made.get(key)
        if out is None:
            make = self._makers.get(key)
            if make is None:
                raise KeyError(key)
            out = self._made.setdefault(key, make())  # two threads may race: the first array kept wins
        return out

    def is_made(self, key: str) -> bool:
        return key in self._made

    def forget(self, keep: Collection[str], remake: Callable[[str], np.ndarray]) -> None:
        """Let go of every array made but ``keep``'s; each is made again when read (by its maker, or by
        ``remake(key)``: the same values)."""
        for key in list(self._made):
            if key not in keep:
                self._makers.setdefault(key, partial(remake, key))
                self._made.pop(key, None)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key) -> bool:
        return key in self._made or key in self._makers

    def __reduce__(self):  # sent to another process: every column made, as a plain dict
        return dict, ([(k, self[k]) for k in self._keys],)
