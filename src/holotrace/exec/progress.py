"""The load's progress bar: bytes decoded and files done, on stderr."""

from __future__ import annotations

import sys
from typing import Optional

__all__ = ["DecodeBar"]


class DecodeBar:
    """The load's progress bar (tqdm) on stderr: bytes decoded and files done; silent when not shown.

    Bytes are file bytes: a file decoded in this process reports its reading as it goes (a gzip
    file's uncompressed bytes are capped at its size); a file decoded by a worker counts when done.
    """

    def __init__(self, sizes: list, n_files: int, show: Optional[bool]):
        self.files = 0
        self.n_files = n_files
        self._sizes = sizes
        self._k = 0  # the file being decoded (index into sizes)
        self._counted = 0  # bytes reported for it so far
        self._bar = None
        if show is None:
            show = sys.stderr.isatty()
        if show and sum(sizes) > 0:
            from tqdm import tqdm

            self._bar = tqdm(
                total=sum(sizes),
                unit="B",
                unit_scale=True,
                unit_divisor=1024,
                desc="decoding",
                file=sys.stderr,
                delay=1.0,
                leave=False,
                dynamic_ncols=True,
            )
            self._bar.set_postfix_str(f"0/{n_files} files", refresh=False)

    @property
    def shown(self) -> bool:
        return self._bar is not None

    def bytes_read(self, k: int) -> None:
        if self._bar is not None and self._k < len(self._sizes):
            k = min(k, self._sizes[self._k] - self._counted)
            if k > 0:
                self._counted += k
                self._bar.update(k)

    def file_done(self, decoded: bool) -> None:
        self.files += 1
        if decoded and self._k < len(self._sizes):
            rest = self._sizes[self._k] - self._counted
            self._k += 1
            self._counted = 0
            if self._bar is not None and rest > 0:
                self._bar.update(rest)
        if self._bar is not None:
            self._bar.set_postfix_str(f"{self.files}/{self.n_files} files")

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
