"""HTA's name shortening (its ``shorten_name``, spec 20 C6): the ``s_name`` columns of the HTA-compatible API.

Not for display (it can turn two kernels into one string and ``ns::(anonymous namespace)::f`` into
``ns::::f``): tables use :func:`holotrace.text.fit_names`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["hta_short_name", "hta_short_names"]


_MEMORY = re.compile(r"(^(hip)?Memcpy)|(^(hip)?Memset)|(^dma)")  # HTA's is_memory_kernel


def _is_memory(name: str) -> bool:
    return _MEMORY.match(name) is not None


def hta_short_name(name: str) -> str:
    """HTA's ``shorten_name`` of one string: template and argument lists removed, the last word kept."""
    if _is_memory(name) or ("<" not in name and "(" not in name):
        return name
    s = name.replace("->", "")
    stack: list[str] = []
    for ch in s:
        if ch == ">" or ch == ")":
            opener = "<" if ch == ">" else "("
            while stack and stack[-1] != opener:
                stack.pop()
            if stack:
                stack.pop()
        else:
            stack.append(ch)
    return "".join(stack).split(" ")[-1]


def hta_short_names(names: Iterable[str]):
    """:func:`hta_short_name` of each string, each distinct string shortened once (numpy object array)."""
    import numpy as np  # here: the text layer is imported by ``holotrace --version``, which loads no numpy
    import pandas as pd

    arr = pd.Series(np.asarray(list(names) if not isinstance(names, np.ndarray) else names, dtype=object))
    codes, uniq = pd.factorize(arr.fillna(""), sort=False)
    short = np.array([hta_short_name(str(u)) for u in uniq], dtype=object)
    return short[codes] if len(uniq) else np.array([], dtype=object)
