"""Numbers for tables and lines: one way to print a count, a duration, a share."""

from __future__ import annotations

import math

__all__ = ["fmt_count", "fmt_duration_us", "fmt_number", "fmt_percent", "fmt_significant", "fmt_steps"]


def fmt_number(v: float, digits: int = 2) -> str:
    """``v`` with thousands separators and ``digits`` decimals; NaN → ``-``, infinities → ``inf``/``-inf``."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float) and math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return f"{v:,.{digits}f}"


def fmt_significant(v: float, digits: int = 4) -> str:
    """``v`` with at least ``digits`` significant digits and thousands separators (``1,275.37``, ``0.1491``)."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    a = abs(v)
    decimals = 2 if a >= 100 else max(0, digits - 1 - int(math.floor(math.log10(a)))) if a > 0 else 0
    return f"{v:,.{decimals}f}"


def fmt_count(n: int, thing: str, plural: str = "") -> str:
    """``1 step``, ``3 steps`` (``plural``: the plural when it is not ``thing + "s"``)."""
    return f"{n:,} {thing if n == 1 else (plural or thing + 's')}"


def fmt_percent(part: float, whole: float, digits: int = 1) -> str:
    """``part`` as a percentage of ``whole`` (``-`` when ``whole`` is 0)."""
    if not whole:
        return "-"
    return f"{100.0 * part / whole:.{digits}f}%"


def fmt_duration_us(us: float) -> str:
    """A duration in µs in the unit that reads best: ``850 us``, ``12.3 ms``, ``4.56 s``."""
    if us is None or (isinstance(us, float) and math.isnan(us)):
        return "-"
    a = abs(us)
    if a >= 1e6:
        return f"{us / 1e6:.2f} s"
    if a >= 1e3:
        return f"{us / 1e3:.1f} ms"
    return f"{us:.0f} us"


def fmt_steps(ids, listed: int = 6) -> str:
    """ProfilerStep ids counted, then named: ``1 step (id 10)``, ``3 steps (ids 4, 5, 6)``, ``40 steps (ids 3 …
    42)``; ``none (…)`` without any."""
    ids = list(ids)
    if not ids:
        return "none (no ProfilerStep#N: the whole trace is one step)"
    named = ", ".join(map(str, ids)) if len(ids) <= listed else f"{ids[0]} … {ids[-1]}"
    return f"{fmt_count(len(ids), 'step')} (id{'s' if len(ids) > 1 else ''} {named})"
