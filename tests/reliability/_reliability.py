"""Helpers of the reliability tests: run the CLI, snapshot folders, build small traces."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path


def snapshot(root: Path, skip: Path | None = None) -> dict:
    """Every entry under ``root`` (but the folder ``skip``): (size, mtime_ns, sha1 of a regular file's content)."""
    import stat

    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        d = Path(dirpath)
        dirnames[:] = [x for x in dirnames if skip is None or d / x != skip]
        for name in dirnames + filenames:
            p = d / name
            st = p.lstat()
            digest = hashlib.sha1(p.read_bytes()).hexdigest() if stat.S_ISREG(st.st_mode) else stat.S_IFMT(st.st_mode)
            out[str(p.relative_to(root))] = (st.st_size if stat.S_ISREG(st.st_mode) else 0, st.st_mtime_ns, digest)
    return out


class Env:
    """A scratch place: ``work`` holds the inputs, ``cache`` is the only folder holotrace may write."""

    def __init__(self, root: Path):
        self.root = root
        self.work = root / "work"
        self.cache = root / "cache"
        self.work.mkdir()
        self._before: dict | None = None

    def freeze(self) -> None:
        """Remember the inputs: ``check_untouched`` then asserts nothing but the cache changed."""
        self._before = snapshot(self.root, skip=self.cache)

    def check_untouched(self) -> None:
        assert self._before is not None
        assert snapshot(self.root, skip=self.cache) == self._before

    def cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        env = dict(os.environ, HOLOTRACE_CACHE_DIR=str(self.cache), PYTHONWARNINGS="default")
        return subprocess.run(
            [sys.executable, "-m", "holotrace.cli", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            cwd=self.work,
        )

    def write(self, name: str, content) -> Path:
        p = self.work / name
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, (dict, list)):
            content = json.dumps(content)
        p.write_bytes(content.encode() if isinstance(content, str) else content)
        return p


def one_line_error(r: subprocess.CompletedProcess, *words: str) -> str:
    """The CLI's stderr is exactly one typed error line holding ``words`` and a fix in parentheses."""
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert len(lines) == 1 and lines[0].startswith("holotrace: error: "), r.stderr
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr
    for w in words:
        assert w in lines[0], (w, lines[0])
    assert lines[0].rstrip().endswith(")"), lines[0]  # "(fix)" closes every message
    return lines[0]


def kernel(name="k", ts=10, dur=5, **kw) -> dict:
    ev = {
        "ph": "X",
        "cat": "kernel",
        "name": name,
        "pid": 0,
        "tid": 7,
        "ts": ts,
        "dur": dur,
        "args": {"stream": 7, "correlation": 1},
    }
    ev.update(kw)
    return ev


def doc(events, rank=0, world=1, **top) -> dict:
    d = {"distributedInfo": {"rank": rank, "world_size": world, "backend": "nccl"}, "traceEvents": events}
    d.update(top)
    return d
