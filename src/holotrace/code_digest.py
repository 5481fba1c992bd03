"""A digest of modules' source files: what names the code that made data kept between runs.

Data a command derives and keeps (the columns kept beside a cache entry: :mod:`holotrace.ingest.derived`) is named
after the code that made it, so that a changed maker, released or not, never serves what its earlier version made.
"""

from __future__ import annotations

import hashlib
import threading

_DONE: dict = {}
_LOCK = threading.Lock()


def code_digest(*modules) -> str:
    """12 hex digits of the bytes of ``modules``' files (a module without one counts by its name); computed once per
    set of modules in a process."""
    key = tuple(m.__name__ for m in modules)
    with _LOCK:
        hit = _DONE.get(key)
        if hit is None:
            h = hashlib.sha1()
            for m in modules:
                h.update(m.__name__.encode("utf-8") + b"\0")
                try:
                    with open(m.__file__, "rb") as fh:
                        h.update(fh.read())
                except (OSError, TypeError, AttributeError):  # (frozen or built in: its name alone)
                    pass
            hit = _DONE[key] = h.hexdigest()[:12]
        return hit
