"""Files that appear whole or not at all, and write errors that say what to do.

Every file holotrace writes (an output, a cache entry's files, an ingest folder's files) is written to a
temporary name in the folder it belongs in, flushed to the disk (``fsync``) and renamed over its final
name: a reader, or the next run after a kill or a power cut, sees the old file or the new one, never half
of one. A write that fails (disk full, the file-size limit, a folder gone) removes its temporary file and
raises :class:`~holotrace.errors.OutputError` naming the path and, when the disk is full, the room needed.

:func:`check_file` and :func:`check_folder` check a destination before any work is done, so that a long
load is not wasted on an output that cannot be written.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Callable, Optional

from holotrace.errors import OutputError

__all__ = ["write_atomic", "write_bytes", "fsync_dir", "write_error", "check_file", "check_folder", "TMP_PREFIX"]

TMP_PREFIX = ".tmp-"  # temporary files (and folders) being written: never read, removed by the writer on failure
_FULL = (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC))


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 100_000 else f"{n:,} bytes"


def write_error(e: OSError, path, needed: Optional[int] = None) -> OutputError:
    """The one-line error for a failed write of ``path`` (``needed``: the bytes it needs, when known)."""
    where = Path(path)
    if e.errno in _FULL:
        try:
            free = shutil.disk_usage(where.parent if not where.is_dir() else where).free
        except OSError:
            free = None
        room = f"needs {_mb(needed)}" if needed else "needs more room"
        room += f", {_mb(free)} free" if free is not None else ""
        return OutputError(f"no space left on the device ({room})", path=where,
                           fix="free disk space there, or write somewhere else")
    if e.errno == errno.EFBIG:
        room = f" (needs {_mb(needed)})" if needed else ""
        return OutputError(f"the file is larger than this process may write{room}", path=where,
                           fix="raise the file-size limit (ulimit -f), or write somewhere else")
    if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return OutputError("cannot write here (permission denied or read-only)", path=where,
                           fix="write somewhere you have permission to")
    return OutputError(f"cannot write the file ({e.strerror or e})", path=where, fix="check the path and the disk")


def fsync_dir(folder) -> None:
    """Make a rename or a new name in ``folder`` durable (where the system allows)."""
    try:
        fd = os.open(str(folder), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_atomic(dst, write: Callable, *, needed: Optional[int] = None, mode: Optional[int] = None) -> None:
    """Write ``dst`` through ``write(fh)`` into a temporary file beside it, fsync it and rename it over ``dst``.

    On any failure the temporary file is removed; an :class:`OSError` becomes :class:`OutputError` (naming
    ``dst`` and, when the disk is full, ``needed`` bytes). ``mode``: the file's permissions (default: as
    ``open`` would make them, under the umask).
    """
    dst = Path(dst)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=TMP_PREFIX, dir=str(dst.parent))
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is None:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(tmp, mode)
        os.replace(tmp, dst)
        tmp = None
    except OSError as e:
        raise write_error(e, dst, needed) from None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
    fsync_dir(dst.parent)


def write_bytes(dst, data: bytes, *, mode: Optional[int] = None) -> int:
    """:func:`write_atomic` of ``data``; returns its length."""
    write_atomic(dst, lambda fh: fh.write(data), needed=len(data), mode=mode)
    return len(data)


# --------------------------------------------------------------------------- destinations, checked up front


def _writable(folder: Path) -> bool:
    return os.access(folder, os.W_OK | os.X_OK)


def check_file(path, *, what: str = "the output file", example: str = "out.html") -> Path:
    """``path`` can be written as a file: raise :class:`OutputError` when it cannot (an empty path, a folder,
    a device or other special file, a missing or read-only folder, a read-only file)."""
    if path is None or not str(path).strip():
        raise OutputError(f"{what} is an empty path", fix=f"give a file name, e.g. {example}")
    p = Path(str(path)).expanduser()
    try:
        st = p.stat()
    except (FileNotFoundError, NotADirectoryError):
        st = None
    except OSError as e:
        raise OutputError(f"{what} cannot be reached ({e.strerror or e})", path=p, fix="give another path") from None
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise OutputError(f"{what} is a folder", path=p, fix=f"give a file name, e.g. {p / example}")
        if not stat.S_ISREG(st.st_mode):
            raise OutputError(f"{what} is not a regular file (a device, pipe or socket)", path=p,
                              fix="give the name of a file to write")
        if not os.access(p, os.W_OK):
            raise OutputError(f"{what} exists and is read-only", path=p, fix="give another name, or make it writable")
    parent = p.parent
    if parent.exists() and not parent.is_dir():
        raise OutputError(f"the folder of {what} is not a folder", path=parent, fix="give a path inside a folder")
    if not parent.exists():
        raise OutputError(f"the folder of {what} does not exist", path=parent, fix=f"create it first: mkdir -p {parent}")
    if not parent.is_dir():
        raise OutputError(f"the folder of {what} is not a folder", path=parent, fix="give a path inside a folder")
    if not _writable(parent):
        raise OutputError(f"the folder of {what} is not writable", path=parent, fix="write somewhere you have permission to")
    return p


def check_folder(path, *, what: str = "the output folder") -> Path:
    """``path`` can be used as a folder to write into (it is created later when absent): raise
    :class:`OutputError` when it cannot (an empty path, a file or device, a read-only folder or ancestor)."""
    if path is None or not str(path).strip():
        raise OutputError(f"{what} is an empty path", fix="give a folder; it is created if absent")
    p = Path(str(path)).expanduser()
    probe = p
    while True:
        try:
            st = probe.stat()
            break
        except (FileNotFoundError, NotADirectoryError):
            if probe.parent == probe:
                raise OutputError(f"{what} cannot be created", path=p, fix="give another folder") from None
            probe = probe.parent
        except OSError as e:
            raise OutputError(f"{what} cannot be reached ({e.strerror or e})", path=p, fix="give another folder") from None
    if not stat.S_ISDIR(st.st_mode):
        kind = "a file" if stat.S_ISREG(st.st_mode) else "a device, pipe or socket"
        if probe == p:
            raise OutputError(f"{what} is {kind}, not a folder", path=p, fix="give a folder; it is created if absent")
        raise OutputError(f"{what} cannot be created: {probe} is {kind}", path=p, fix="give another folder")
    if not _writable(probe):
        raise OutputError(f"{what} is not writable" if probe == p else f"{what} cannot be created in {probe} (not writable)",
                          path=p, fix="write somewhere you have permission to")
    return p
