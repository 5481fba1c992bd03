"""atheris harness for the JSON scanner (``holotrace.ingest._scan``), the C code every trace byte goes through.

    python tests/reliability/atheris_scan.py -max_total_time=300 [-seed=1] [CORPUS_DIR]

Each input is scanned as one piece of a ``traceEvents`` list, with and without raw args, and the scan's
tables are built (``piece_tables``) as a load builds them: any crash, hang or Python exception other than the
scanner's typed rejections is a finding. Seeds: slices of the bundled traces (``tests/data/traces``). The
extension is not built with libFuzzer's coverage (``-fsanitize=fuzzer``), so the fuzzer is guided by the Python
side's coverage only and mutates the C scanner's input blind. Result of the last run: ``docs/reliability.md``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import atheris

with atheris.instrument_imports():
    from holotrace.ingest import (
        _scan,
        columns,  # noqa: F401  (configures the scanner's keys)
    )
    from holotrace.ingest.decode import piece_strings, piece_tables

HERE = Path(__file__).resolve().parent


def seeds(folder: Path) -> None:
    """Write seed inputs (slices of the bundled traces' event lists) into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    for i, f in enumerate(sorted((HERE.parent / "data" / "traces").rglob("*.json"))):
        data = f.read_bytes()
        start = data.find(b"[", data.find(b'"traceEvents"'))
        if start > 0:
            (folder / f"seed-{i}").write_bytes(data[start + 1 : start + 1 + 4096])


def one(data: bytes) -> None:
    for all_args in (False, True):
        r = _scan.scan(data, all_args)
        if r["n"]:
            try:
                piece_tables(r, data, piece_strings(r), all_args)
            except UnicodeDecodeError:
                pass  # the decoder's rejection of a piece that is not UTF-8 (the load then reports the file)


if __name__ == "__main__":
    dirs = [a for a in sys.argv[1:] if not a.startswith("-")]
    if dirs:
        seeds(Path(dirs[0]))
    atheris.Setup(sys.argv, one)
    atheris.Fuzz()
