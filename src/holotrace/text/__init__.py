"""Text on its way to people: the one sanitiser, the one name formatter, number formats.

* :func:`sanitize` — control characters from a trace written as escapes (``text.sanitize``);
* :func:`fit_names` / :func:`fit_name` — names shortened by structure to a width, never into a string that
  another name of the same table also becomes (``text.names``);
* :func:`hta_short_names` — HTA's ``shorten_name`` (the HTA-compatible ``s_name`` columns; ``text.hta``);
* :func:`fmt_number`, :func:`fmt_percent`, :func:`fmt_duration_us` — numbers for tables and lines
  (``text.numbers``).

Part of the base layer: it imports nothing of holotrace's.
"""

from holotrace.text.hta import hta_short_name, hta_short_names
from holotrace.text.names import ELLIPSIS, cut, fit_name, fit_names, structural_forms
from holotrace.text.numbers import (
    fmt_count,
    fmt_duration_us,
    fmt_number,
    fmt_percent,
    fmt_significant,
    fmt_steps,
)
from holotrace.text.sanitize import html_escape, sanitize, sanitize_lines

__all__ = [
    "ELLIPSIS",
    "cut",
    "fit_name",
    "fit_names",
    "structural_forms",
    "hta_short_name",
    "hta_short_names",
    "fmt_count",
    "fmt_duration_us",
    "fmt_number",
    "fmt_percent",
    "fmt_significant",
    "fmt_steps",
    "html_escape",
    "sanitize",
    "sanitize_lines",
]
