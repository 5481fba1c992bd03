"""The one name formatter: names (kernels, operators, annotations) shortened to a width for people.

A name is shortened by its structure, one step at a time, only as far as the width asks:

0. the full name;
1. without a leading ``void`` and the trailing argument list (``f(int, float*)`` → ``f``);
2. template arguments collapsed (``kernel<2, Functor<float>, Array<char*, 2> >`` → ``kernel<…>``);
3. namespaces dropped (``at::native::kernel<…>`` → ``kernel<…>``).

``(anonymous namespace)`` stays a readable token (it is never taken for an argument list). Memory copies
and sets (``Memcpy HtoD (Pinned -> Device)``) are never restructured: their parentheses say the direction.

Names are shortened together (:func:`fit_names`): two different names never print as the same string. A
group that would collide goes back to a fuller form; a form still too wide is cut with an ellipsis, around
the part that tells it apart from the others (``vectorized_elementwise_kernel<…char*, 2>`` against
``…char*, 4>``), even if that costs width. Every string also goes through :func:`~holotrace.text.sanitize`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Optional

from holotrace.text.sanitize import sanitize

__all__ = ["ELLIPSIS", "cut", "fit_name", "fit_names", "structural_forms"]

ELLIPSIS = "…"
ANON = "(anonymous namespace)"
_ANON_MARK = "\x00"  # stands for ANON while the structure is read (never in a sanitised name)
_MEMORY = re.compile(r"^(hip)?(Memcpy|Memset)|^dma")
LEVELS = 4


def _close(s: str, i: int, open_ch: str, close_ch: str) -> int:
    """Index of the bracket closing the one opened at ``i`` (-1 when unbalanced)."""
    depth = 0
    for j in range(i, len(s)):
        c = s[j]
        if c == open_ch:
            depth += 1
        elif c == close_ch and not (close_ch == ">" and j > 0 and s[j - 1] == "-"):
            depth -= 1
            if depth == 0:
                return j
    return -1


def _strip_args(s: str) -> str:
    """``s`` without a leading ``void `` and its trailing top-level argument list (and a trailing ``const``)."""
    if s.startswith("void "):
        s = s[5:]
    t = s[:-6] if s.endswith(" const") else s
    if not t.endswith(")"):
        return s
    depth = 0
    for i in range(len(t) - 1, -1, -1):
        c = t[i]
        if c == ")":
            depth += 1
        elif c == "(":
            depth -= 1
            if depth == 0:
                return t[:i].rstrip() if i > 0 and t[:i].strip() else s
    return s


def _collapse_templates(s: str, keep: int = 0) -> str:
    """Each outermost ``<…>`` of ``s`` collapsed to ``<…>``, or with ``keep`` > 0 to ``<…`` plus the last
    ``keep`` characters of its content and ``>``."""
    out, i = [], 0
    while i < len(s):
        c = s[i]
        if c == "<" and not (i > 0 and s[i - 1] == "<") and not s.startswith("operator", max(0, i - 8)):
            j = _close(s, i, "<", ">")
            if j > i:
                inner = s[i + 1 : j].strip()
                tail = inner[-keep:] if keep and len(inner) > keep else (inner if keep else "")
                out.append("<" + (tail if keep and len(inner) <= keep else ELLIPSIS + tail) + ">")
                i = j + 1
                continue
        out.append(c)
        i += 1
    return "".join(out)


def _drop_namespaces(s: str) -> str:
    """``s`` without the qualifiers before its last top-level ``::``."""
    depth, cut_at = 0, 0
    i = 0
    while i < len(s):
        c = s[i]
        if c in "<(":
            depth += 1
        elif c in ">)" and not (c == ">" and i > 0 and s[i - 1] == "-"):
            depth = max(0, depth - 1)
        elif c == ":" and depth == 0 and s.startswith("::", i):
            cut_at = i + 2
            i += 1
        i += 1
    return s[cut_at:] or s


_PREFIX = re.compile(r"^([a-z_]+:)(?!:)(.+)$", re.S)  # a label's family (``kernel:void f<…>(int)``)


def structural_forms(name: str) -> list[str]:
    """The name at each step (levels 0-3; equal neighbours when a step changes nothing), sanitised. A
    leading lower-case ``family:`` label is kept and the name after it shortened."""
    full = sanitize(str(name))
    m = _PREFIX.match(full)
    if m:
        return [full] + [m.group(1) + f for f in structural_forms(m.group(2))[1:]]
    if _MEMORY.match(full) or not any(x in full for x in ("<", "(", "::", "void ")):
        return [full] * LEVELS
    s = full.replace(ANON, _ANON_MARK)
    one = _strip_args(s)
    two = _collapse_templates(one)
    three = _drop_namespaces(two)
    return [full] + [f.replace(_ANON_MARK, ANON) for f in (one, two, three)]


def cut(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters, its start and end kept around an ellipsis."""
    if width <= 0:
        return ""
    if len(text) <= width:
        return text
    if width == 1:
        return ELLIPSIS
    head = (width - 1) * 2 // 3
    tail = width - 1 - head
    return text[:head] + ELLIPSIS + (text[-tail:] if tail else "")


def _cut_around(text: str, lo: int, hi: int, width: int) -> str:
    """``text`` cut to about ``width`` characters keeping ``text[lo:hi]`` (the part that tells it apart): as
    much of its start as fits (up to its first ``<`` when that is all), an ellipsis, the differing part and
    what follows it, an ellipsis when cut. Wider than ``width`` only when the differing part alone is."""
    if len(text) <= width:
        return text
    hi = min(len(text), max(hi, lo + 1))
    room = max(0, width - (hi - lo) - 2)
    lt = text.find("<")
    head = lt + 1 if 0 <= lt < lo and lt + 1 <= room else room * 2 // 3
    head = min(head, lo)
    if hi + max(0, room - head) >= len(text):  # the end fits: give what is left to the start
        head = min(lo, max(head, width - 1 - (len(text) - lo)))
        b = len(text)
    else:
        b = hi + max(0, room - head)
    out = text[:head] + (ELLIPSIS if lo > head else "") + text[max(lo, head) : b]
    return out + (ELLIPSIS if b < len(text) else "")


_QUALIFIER = re.compile(r"(?:\(anonymous namespace\)|\b[A-Za-z_]\w*)::")


def _unqualified(s: str) -> str:
    """``s`` with every namespace qualifier removed, inside template arguments too."""
    return _QUALIFIER.sub("", s)


def _token_end(s: str, lo: int) -> int:
    """End of the word starting at ``lo`` (where a name first differs from the others), at most 24 on:
    ``s[:lo + 1]`` already tells the name apart; the rest of the word makes it readable."""
    m = re.compile(r"[,<>() ]").search(s, lo + 1)
    return min(m.start() if m else len(s), lo + 24, len(s))


def _lcp(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def fit_names(names: Iterable[str], width: Optional[int]) -> list[str]:
    """Each name shortened to ``width`` characters (``None``: full names, sanitised) by structure; two
    different names never print alike (a name may stay wider than ``width`` to keep that promise)."""
    names = [("" if n is None else str(n)) for n in names]
    uniq = list(dict.fromkeys(names))
    if width is None:
        return [sanitize(n) for n in names]
    forms = {u: structural_forms(u) for u in uniq}
    level = {}
    for u, f in forms.items():
        level[u] = next((k for k in range(LEVELS) if len(f[k]) <= width), LEVELS - 1)
        # the fewest steps that fit; a full name that fits is never shortened
    printed = _resolve(uniq, forms, level, width)
    shown = _cut_all(uniq, printed, width)
    return [shown[n] for n in names]


def _groups(uniq: Sequence[str], printed: dict[str, str]) -> list[list[str]]:
    by: dict[str, list[str]] = {}
    for u in uniq:
        by.setdefault(printed[u], []).append(u)
    return [g for g in by.values() if len(g) > 1]


def _resolve(uniq: Sequence[str], forms: dict[str, list[str]], level: dict[str, int], width: int) -> dict[str, str]:
    """Printed forms after moving every colliding group back one step at a time (template tails first)."""
    printed = {u: forms[u][level[u]] for u in uniq}
    for _ in range(4 * LEVELS):
        groups = _groups(uniq, printed)
        if not groups:
            break
        for g in groups:
            # at the template step, the tails of the collapsed arguments may already tell them apart
            if all(level[u] == 2 for u in g):
                tailed = _with_tails(g, forms)
                if tailed is not None:
                    printed.update(tailed)
                    continue
            told = _told_apart(g, forms, width)
            if told is not None:
                printed.update(told)
                continue
            for u in g:
                level[u] = max(0, level[u] - 1)
                printed[u] = forms[u][level[u]]
    return printed


def _told_apart(group: Sequence[str], forms: dict[str, list[str]], width: int) -> Optional[dict[str, str]]:
    """For names alike once shortened: each name without qualifiers (templates kept), cut around the part
    where it differs from the others; None when that does not tell them apart."""
    if any(forms[u][1] == forms[u][0] and "<" not in forms[u][0] for u in group):
        return None
    plain = {u: _unqualified(forms[u][1]) for u in group}
    out = {}
    for u, s in plain.items():
        others = [t for v, t in plain.items() if v != u and t != s]
        if len(others) < len(group) - 1:
            return None
        lo = max(_lcp(s, t) for t in others)
        out[u] = _cut_around(s, lo, _token_end(s, lo), width)
    return out if len(set(out.values())) == len(group) else None


def _with_tails(group: Sequence[str], forms: dict[str, list[str]]) -> Optional[dict[str, str]]:
    """Level-2 forms keeping the shortest template-argument tails that make ``group`` distinct, if any."""
    ones = {u: forms[u][1].replace(ANON, _ANON_MARK) for u in group}
    for keep in (8, 12, 16, 24, 32):
        out = {u: _collapse_templates(s, keep).replace(_ANON_MARK, ANON) for u, s in ones.items()}
        if len(set(out.values())) == len(group):
            return out
    return None


def _cut_all(uniq: Sequence[str], printed: dict[str, str], width: int) -> dict[str, str]:
    """Forms wider than ``width`` cut; a cut that would collide keeps the differing part instead."""
    shown = {u: cut(printed[u], width) for u in uniq}
    for g in _groups(uniq, shown):
        texts = [printed[u] for u in g]
        for u in g:
            s = printed[u]
            others = [t for t in texts if t != s]
            if not others:
                continue
            lo = max(_lcp(s, t) for t in others)
            shown[u] = _cut_around(s, lo, _token_end(s, lo), width)
    for g in _groups(uniq, shown):  # still alike (e.g. one name is a prefix of another): print them whole
        for u in g:
            shown[u] = printed[u]
    return shown


def fit_name(name: str, width: Optional[int], others: Iterable[str] = ()) -> str:
    """One name shortened to ``width`` (:func:`fit_names`), kept apart from ``others`` shown beside it."""
    rest = [o for o in others if o != name]
    return fit_names([name, *rest], width)[0]
