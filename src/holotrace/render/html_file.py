"""Writing a rendered HTML page to the file the user named."""

from __future__ import annotations

import os
from pathlib import Path

from holotrace.errors import AnalysisError

__all__ = ["write_html"]


def write_html(html: str, output) -> int:
    """Write ``html`` to ``output`` through a temporary file beside it; returns the size in bytes."""
    data = html.encode("utf-8")
    out = Path(output)
    if out.is_dir():
        raise AnalysisError("is a folder", path=out, fix="give a file name, e.g. -o report.html")
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, out)
    return len(data)
