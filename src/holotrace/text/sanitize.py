"""Text from traces on its way to a terminal."""

from __future__ import annotations

import re

__all__ = ["sanitize", "sanitize_lines", "html_escape"]

# control characters (C0, DEL, C1) and the bidirectional overrides: a name from a trace never moves the
# cursor, changes colours, sets a window title or reorders what a terminal shows
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escape(m: re.Match) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def sanitize(text: str) -> str:
    """``text`` for a terminal: control characters written as escapes (``\\x1b``, ``\\r``, ``\\u202e``)."""
    return _CONTROL.sub(_escape, text) if _CONTROL.search(text) else text


def sanitize_lines(text: str) -> str:
    """:func:`sanitize` of each line of ``text`` (its line breaks kept)."""
    return "\n".join(sanitize(line) for line in text.split("\n"))


def html_escape(text) -> str:
    """``text`` for HTML: sanitised, then HTML-escaped (``<``, ``&``, quotes)."""
    from html import escape

    return escape(sanitize(str(text)))
