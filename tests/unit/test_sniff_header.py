"""A trace's head is read by the standard library's json when that decodes as the decoder's JSON library (msgspec)
would, and by msgspec otherwise: :func:`holotrace.ingest.discover.sniff` gives the same metadata either way."""

import gzip

import msgspec
import pytest

from holotrace.errors import HolotraceError
from holotrace.ingest import discover

KEYS = ("distributedInfo", "schemaVersion", "deviceProperties")


def by_msgspec(head: bytes):
    """The head's metadata as msgspec reads it (every key that decodes), or the error it raises."""
    try:
        raw = msgspec.json.decode(head + b"}", type=dict[str, msgspec.Raw])
    except (msgspec.DecodeError, RecursionError):
        return "error"
    out = {}
    for k in KEYS:
        if k in raw:
            try:
                out[k] = msgspec.json.decode(raw[k])
            except msgspec.DecodeError:
                pass
    return out


def sniffed(tmp_path, head: bytes, gz: bool):
    p = tmp_path / ("t.json.gz" if gz else "t.json")
    body = head + b', "traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 2, "pid": 1, "tid": 1}]}'
    p.write_bytes(gzip.compress(body) if gz else body)
    try:
        return discover.sniff(p)
    except HolotraceError:
        return "error"


HEADS = [
    b'{"schemaVersion": 1, "distributedInfo": {"rank": 3, "world_size": 8, "backend": "nccl"}',
    b'{"schemaVersion": 1.5, "deviceProperties": [{"id": 0, "name": "H100", "totalGlobalMem": 85899345920}]',
    b'{"other": [1, 2, {"x": null}], "distributedInfo": {"rank": 12345678901234567890}',
    b'{"distributedInfo": {"rank": 1}, "distributedInfo": {"rank": 2}',  # a repeated key: the last
    b'{"distributedInfo": {"rank": 1, "note": "caf\\u00e9 \\t"}, "x": -0.0, "y": 1e-400',
    b'{"distributedInfo": {"rank": NaN}',  # not JSON: msgspec refuses it, json would not
    b'{"distributedInfo": {"rank": 1}, "x": Infinity',
    b'{"distributedInfo": {"rank": 1}, "x": 1e400',  # out of a float's range
    b'{"distributedInfo": {"rank": 1, "s": "\\udc80"}',  # a lone surrogate
    b'{"distributedInfo": {"rank": 1, "s": "\\ud83d\\ude00"}',  # a pair
    b'{"distributedInfo": {"rank": 1}, "x": [1, 2',  # damaged
    b'{"distributedInfo": {"rank": 1}, "x": "\xff\xfe"',  # not UTF-8
]


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("head", HEADS)
def test_sniff_reads_the_head_as_msgspec_does(tmp_path, head, gz):
    want = by_msgspec(head)
    got = sniffed(tmp_path, head, gz)
    assert got == want or (want == "error" and got == "error")
    assert repr(got) == repr(want)  # (the same types too: 1 and 1.0 differ)


def test_the_plain_path_is_taken_for_a_plain_head():
    """The standard library decodes an ordinary head; the cases msgspec refuses fall back to it."""
    assert discover._plain_header(HEADS[0] + b"}") is not None
    for head in HEADS[5:9]:
        assert discover._plain_header(head + b"}") is None
