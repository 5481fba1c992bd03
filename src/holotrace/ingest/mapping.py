"""Files mapped read-only into memory: a packed column file, a spill's column file."""

from __future__ import annotations

import mmap
import os
from pathlib import Path

_PROT_READ, _MAP_SHARED, _MADV_DONTNEED = 1, 1, 4


def _libc():
    """The C library's mmap, munmap and madvise, or None where they cannot be called this way."""
    global _LIBC
    if _LIBC is None:
        _LIBC = False
        if os.name == "posix":
            try:
                import ctypes

                lib = ctypes.CDLL(None, use_errno=True)
                lib.mmap.restype = ctypes.c_void_p
                lib.mmap.argtypes = [
                    ctypes.c_void_p,
                    ctypes.c_size_t,
                    ctypes.c_int,
                    ctypes.c_int,
                    ctypes.c_int,
                    ctypes.c_int64,
                ]
                lib.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
                lib.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
                _LIBC = lib
            except (OSError, AttributeError):
                pass
    return _LIBC or None


_LIBC = None


def map_file(path: Path):
    """(a read-only mapping of the whole file exporting the buffer protocol, its size).

    On POSIX systems the C library maps it directly, so that a mapping holds no file descriptor (a job of
    thousands of ranks must not run out of them, as one descriptor per ``mmap.mmap`` would); the mapping
    goes when the last array using it does. Elsewhere Python's ``mmap`` is used.
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            return b"", 0
        lib = _libc()
        if lib is None:
            return mmap.mmap(fd, 0, access=mmap.ACCESS_READ), size
        import ctypes
        import weakref

        addr = lib.mmap(None, size, _PROT_READ, _MAP_SHARED, fd, 0)
        if addr is None or addr == ctypes.c_void_p(-1).value:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), str(path))
    finally:
        os.close(fd)
    buf = (ctypes.c_char * size).from_address(addr)
    weakref.finalize(buf, lib.munmap, addr, size)
    buf.release_pages = lambda: lib.madvise(addr, size, _MADV_DONTNEED)  # noqa: B023  (this mapping's own)
    return buf, size
