"""What HTA's ``Trace.write_raw_trace(output_file, trace_contents)`` receives and writes.

HTA builds every derived trace (counters, overlays) as one dict of the whole file and hands it to
``write_raw_trace``; HTA's tests replace that method to look at the dict. holotrace writes derived traces by
appending events to the input's bytes, so a facade method hands ``write_raw_trace`` an :class:`AugmentedTrace`: a
read-only mapping with the dict's keys whose contents are read from the file only if someone looks at them
(``trace_contents["traceEvents"]`` is the input's events followed by the new ones), and which
``write_raw_trace`` writes without reading the events into Python objects.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Optional, Union

from holotrace.render import trace_file

__all__ = ["AugmentedTrace", "write_raw_trace", "PHASE_COUNTER", "PHASE_FLOW_START", "PHASE_FLOW_END"]

PHASE_COUNTER: str = "C"  # the Chrome trace phases of the events HTA writes (``hta.common.trace``)
PHASE_FLOW_START: str = "s"
PHASE_FLOW_END: str = "f"


class AugmentedTrace(Mapping):
    """A trace file plus events (JSON object texts) appended to its ``traceEvents``."""

    def __init__(self, source: Union[str, Path], events: Sequence[str], top_keys: Optional[Sequence[str]] = None):
        self.source, self.events, self.top_keys = Path(source), list(events), top_keys
        self._doc: Optional[dict] = None

    def _document(self) -> dict:
        if self._doc is None:
            doc = json.loads(trace_file.read_trace_bytes(self.source))
            if isinstance(doc, list):  # a bare event list: HTA's loader reads it as the events
                doc = {"traceEvents": doc}
            doc["traceEvents"] = list(doc.get("traceEvents", [])) + [json.loads(e) for e in self.events]
            self._doc = doc
        return self._doc

    def __getitem__(self, key: str) -> Any:
        return self._document()[key]

    def __iter__(self):
        return iter(self._document())

    def __len__(self) -> int:
        return len(self._document())

    def write(self, output: Union[str, Path]) -> Path:
        return trace_file.write_trace_with_events(self.source, output, self.events, top_keys=self.top_keys)


def write_raw_trace(output_file: Union[str, Path], trace_contents: Mapping) -> None:
    """Write a trace document; gzip-compressed when the name ends with ``.gz`` (HTA always compresses).

    An :class:`AugmentedTrace` keeps its input's bytes; any other mapping is written as JSON.
    """
    if isinstance(trace_contents, AugmentedTrace):
        trace_contents.write(output_file)
        return
    opener = gzip.open if str(output_file).endswith(".gz") else open
    with opener(output_file, "wt") as f:
        json.dump(dict(trace_contents), f, indent=2)
