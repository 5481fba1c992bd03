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
from collections.abc import Callable
from pathlib import Path
from typing import Optional

from holotrace.errors import OutputError

__all__ = [
    "temp_name",
    "sweep",
    "write_atomic",
    "write_bytes",
    "fsync_dir",
    "write_error",
    "check_file",
    "check_folder",
    "TMP_PREFIX",
    "kill_point",
]

TMP_PREFIX = ".tmp-"  # temporary files (and folders) being written: never read, removed by the writer on failure
_FULL = (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC))


def temp_name(stem: str = "", prefix: str = TMP_PREFIX) -> str:
    """A temporary name no other process uses: ``.tmp-<host>-<pid>-<stem>-<random>`` (:func:`sweep` reads it;
    ``prefix`` replaces ``.tmp-``)."""
    import socket

    host = socket.gethostname().replace("-", "_") or "host"
    return f"{prefix}{host}-{os.getpid()}-{stem}{'-' if stem else ''}{os.urandom(4).hex()}"


def _alive(pid: int) -> bool:
    """The process runs (a zombie, killed but not yet reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's: leave its files alone
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


def sweep(folder, prefix: str = TMP_PREFIX) -> int:
    """Remove the temporary files and folders that processes of this machine left in ``folder`` when they were
    killed (their process is gone); returns how many. Those of live processes or other machines stay. ``prefix``:
    the one their names were made with (:func:`temp_name`)."""
    import socket

    host = socket.gethostname().replace("-", "_") or "host"
    n = 0
    try:
        names = os.listdir(folder)
    except OSError:
        return 0
    for name in names:
        parts = name[len(prefix) :].split("-")
        if not name.startswith(prefix) or len(parts) < 3 or parts[0] != host or not parts[1].isdigit():
            continue
        if _alive(int(parts[1])):
            continue
        p = Path(folder) / name
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            try:
                p.unlink()
            except OSError:
                continue
        n += 1
    return n


# the fault-injection tests' hook: HOLOTRACE_KILL_AT="point:n" kills the run (SIGKILL to this process's group: the
# command and its workers) the n-th time a process of it reaches ``point``; "point:n:worker" kills only a worker
# that reaches it (a pool process or a Ray worker: any process but the first of the run to import this module,
# which leaves its pid to the others in the environment); tests/reliability/; unset, a call costs one comparison
_KILL_AT = os.environ.get("HOLOTRACE_KILL_AT")
_hits: dict = {}
if _KILL_AT is not None:
    os.environ.setdefault("HOLOTRACE_KILL_DRIVER", str(os.getpid()))


def kill_point(name: str) -> None:
    """A place where a kill must leave nothing half-written: the fault-injection tests kill the process here."""
    if _KILL_AT is None:
        return
    point, n, who = (_KILL_AT.split(":") + ["1", "run"])[:3]
    if point != name:
        return
    import multiprocessing
    import signal

    worker = multiprocessing.parent_process() is not None or os.environ.get("HOLOTRACE_KILL_DRIVER") != str(os.getpid())
    if who in ("worker", "worker_once") and not worker:
        return
    _hits[name] = _hits.get(name, 0) + 1
    if _hits[name] != int(n or 1):
        return
    if who == "worker_once":  # one worker in the whole run: the first to create the marker file
        try:
            os.close(os.open(os.environ["HOLOTRACE_KILL_MARK"], os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except (KeyError, OSError):
            return
    if who.startswith("worker"):
        os.kill(os.getpid(), signal.SIGKILL)
    os.killpg(os.getpgid(0), signal.SIGKILL)


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
        return OutputError(
            f"no space left on the device ({room})", path=where, fix="free disk space there, or write somewhere else"
        )
    if e.errno == errno.EFBIG:
        room = f" (needs {_mb(needed)})" if needed else ""
        return OutputError(
            f"the file is larger than this process may write{room}",
            path=where,
            fix="raise the file-size limit (ulimit -f), or write somewhere else",
        )
    if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return OutputError(
            "cannot write here (permission denied or read-only)",
            path=where,
            fix="write somewhere you have permission to",
        )
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
    tmp = fh = None
    sweep(dst.parent)  # what killed writers of this machine left here
    try:
        fd, tmp = tempfile.mkstemp(prefix=temp_name() + "-", dir=str(dst.parent))
        with os.fdopen(fd, "wb") as raw:
            fh = _Counting(raw)
            write(fh)
            kill_point("write")
            fh.flush()
            os.fsync(fh.fileno())
        if mode is None:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(tmp, mode)
        kill_point("rename")
        os.replace(tmp, dst)
        tmp = None
    except OSError as e:
        raise write_error(e, dst, needed or (fh.n if fh is not None else None)) from None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
    fsync_dir(dst.parent)


class _Counting:
    """A binary file that counts the bytes it was asked to write (the room a failed write needed, at least)."""

    def __init__(self, fh):
        self._fh, self.n = fh, 0

    def write(self, data) -> int:
        self.n += len(memoryview(data).cast("B")) if not isinstance(data, (bytes, bytearray)) else len(data)
        return self._fh.write(data)

    def __getattr__(self, name):
        return getattr(self._fh, name)


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
            raise OutputError(
                f"{what} is not a regular file (a device, pipe or socket)",
                path=p,
                fix="give the name of a file to write",
            )
        if not os.access(p, os.W_OK):
            raise OutputError(f"{what} exists and is read-only", path=p, fix="give another name, or make it writable")
    parent = p.parent
    if parent.exists() and not parent.is_dir():
        raise OutputError(f"the folder of {what} is not a folder", path=parent, fix="give a path inside a folder")
    if not parent.exists():
        raise OutputError(
            f"the folder of {what} does not exist", path=parent, fix=f"create it first: mkdir -p {parent}"
        )
    if not parent.is_dir():
        raise OutputError(f"the folder of {what} is not a folder", path=parent, fix="give a path inside a folder")
    if not _writable(parent):
        raise OutputError(
            f"the folder of {what} is not writable", path=parent, fix="write somewhere you have permission to"
        )
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
            raise OutputError(
                f"{what} cannot be reached ({e.strerror or e})", path=p, fix="give another folder"
            ) from None
    if not stat.S_ISDIR(st.st_mode):
        kind = "a file" if stat.S_ISREG(st.st_mode) else "a device, pipe or socket"
        if probe == p:
            raise OutputError(f"{what} is {kind}, not a folder", path=p, fix="give a folder; it is created if absent")
        raise OutputError(f"{what} cannot be created: {probe} is {kind}", path=p, fix="give another folder")
    if not _writable(probe):
        raise OutputError(
            f"{what} is not writable" if probe == p else f"{what} cannot be created in {probe} (not writable)",
            path=p,
            fix="write somewhere you have permission to",
        )
    return p
