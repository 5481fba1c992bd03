"""The metadata around a trace's event list: the JSON object's other keys, before and after ``traceEvents``.

The event list itself is read by the compiled scanner; these few keys (``distributedInfo``, ``deviceProperties``,
``baseTimeNanoseconds``, ...) are decoded here, with the one error a damaged document gets.
"""

from __future__ import annotations

import json

import msgspec

from holotrace.errors import TraceFormatError

__all__ = ["decode_meta", "json_error", "tail_meta"]

_DEC_TOP_RAW = msgspec.json.Decoder(dict[str, msgspec.Raw])


def tail_meta(tail: bytes, fmt: str) -> tuple[dict, bool]:
    """Metadata written after the event list; (meta, the document closes properly)."""
    t = bytes(tail).strip()
    if fmt == "array":
        return {}, t == b""
    if t.startswith(b"}"):
        return {}, t[1:].strip() == b""
    if not t.startswith(b","):
        return {}, False
    try:
        return decode_meta(b"{" + t[1:]), True
    except (msgspec.DecodeError, ValueError, RecursionError):
        return {}, False


def json_error(path: str, e: Exception, where: str = "") -> TraceFormatError:
    why = (
        "nested too deeply" if isinstance(e, RecursionError) else str(e).splitlines()[0] if str(e) else type(e).__name__
    )
    return TraceFormatError(
        f"not valid JSON {where} ({why})".replace("  ", " "), path=path, fix="the file is damaged or not a JSON trace"
    )


def decode_meta(text: bytes) -> dict:
    try:
        raw = _DEC_TOP_RAW.decode(text)
    except msgspec.DecodeError:
        obj = json.loads(text.decode("utf-8"))  # NaN/Infinity literals; ValueError when really broken
        if not isinstance(obj, dict):
            raise ValueError("not an object") from None
        return {k: v for k, v in obj.items() if k != "traceEvents"}
    meta = {}
    for k, v in raw.items():
        if k == "traceEvents":
            continue
        try:
            meta[k] = msgspec.json.decode(v)
        except msgspec.DecodeError:
            meta[k] = json.loads(bytes(v))
    return meta
