"""Writing a rendered HTML page to the file the user named."""

from __future__ import annotations

from holotrace.atomic import check_file, write_bytes

__all__ = ["write_html"]


def write_html(html: str, output) -> int:
    """Write ``html`` to ``output`` whole or not at all (a temporary file beside it, fsynced and renamed; a
    failed write is one :class:`~holotrace.errors.OutputError`); returns the size in bytes."""
    out = check_file(output, what="the report file", example="report.html")
    return write_bytes(out, html.encode("utf-8"))
