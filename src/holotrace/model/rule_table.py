"""The rule table as data: reading ``default.rules`` and users' rule files, and matching names against it.

A rules file holds one rule a line (see the header of ``default.rules`` and docs/rules.md)::

    ON      FAMILY   TYPE            KIND            PATTERN
    kernel  vllm     communication   all_reduce      cross_device_reduce_(1|2)stage
    op      c10d     communication   all_reduce      ^c10d::allreduce

A :class:`RuleTable` is the list of rules in the order they are tried: a user's rules first, then the built-in
ones. Names are classified once per distinct string (:meth:`RuleTable.classify_kernels`,
:meth:`RuleTable.classify_ops`), so the cost grows with the number of distinct names, not of events.
"""

from __future__ import annotations

import enum
import json
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Union

import numpy as np

from holotrace.errors import RulesError

__all__ = [
    "KernelType",
    "CommKind",
    "Rule",
    "RuleTable",
    "default_table",
    "hta_table",
    "user_table",
    "resolve_table",
    "ENV_RULES",
    "DEFAULT_RULES_FILE",
]

#: environment variable naming users' rules files (separated like PATH), read when no rules are given
ENV_RULES = "HOLOTRACE_RULES"
DEFAULT_RULES_FILE = Path(__file__).with_name("default.rules")


class KernelType(enum.IntEnum):
    COMMUNICATION = 0
    MEMORY = 1
    COMPUTATION = 2
    OTHER = 3


class CommKind(enum.IntEnum):
    """The collective a communication event performs (``UNKNOWN`` when no rule says)."""

    UNKNOWN = 0
    ALL_REDUCE = 1
    ALL_GATHER = 2
    REDUCE_SCATTER = 3
    ALL_TO_ALL = 4
    SEND_RECV = 5
    BROADCAST = 6
    REDUCE = 7
    GATHER = 8
    SCATTER = 9
    BARRIER = 10
    PEER_COPY = 11

    @property
    def label(self) -> str:
        return "-" if self is CommKind.UNKNOWN else self.name.lower()


_KINDS = {k.label: k for k in CommKind}
KIND_FROM_ARGS = -2  # an op rule whose kind is read from the op's "Collective name" argument
_TYPES = {t.name.lower(): t for t in KernelType}
_ON = ("kernel", "op")
HTA_FAMILY = "hta"

# "Collective name" argument values (record_param_comms) -> kind, tested in this order on the lower-cased value
# with underscores removed: allreduce_coalesced, _allgather_base, reduce_scatter_tensor_coalesced, alltoall_base ...
_ARG_KINDS = (
    ("reducescatter", CommKind.REDUCE_SCATTER),
    ("allreduce", CommKind.ALL_REDUCE),
    ("allgather", CommKind.ALL_GATHER),
    ("alltoall", CommKind.ALL_TO_ALL),
    ("send", CommKind.SEND_RECV),
    ("recv", CommKind.SEND_RECV),
    ("broadcast", CommKind.BROADCAST),
    ("barrier", CommKind.BARRIER),
    ("gather", CommKind.GATHER),
    ("scatter", CommKind.SCATTER),
    ("reduce", CommKind.REDUCE),
)


def kind_of_collective_name(value: str) -> CommKind:
    """The kind of a ``Collective name`` argument (``allreduce``, ``_allgather_base``, ...); UNKNOWN if none."""
    v = value.lower().replace("_", "")
    return next((k for key, k in _ARG_KINDS if key in v), CommKind.UNKNOWN)


@dataclass(frozen=True)
class Rule:
    """One line of a rules file."""

    on: str  # "kernel" | "op"
    family: str
    type: KernelType
    kind: int  # a CommKind, or KIND_FROM_ARGS
    regex: str
    source: str  # the file (a label for the built-in table)
    line: int

    @property
    def pattern(self) -> re.Pattern:
        """The compiled ``regex`` (compiled on first use and kept by ``re``), anchored once where each of its
        alternatives is anchored (:func:`anchored_once`): the same names match."""
        return re.compile(anchored_once(self.regex))

    @property
    def label(self) -> str:
        """``family (file:line)`` as ``holotrace rules`` shows it."""
        return f"{self.family} ({Path(self.source).name}:{self.line})"

    @property
    def kind_label(self) -> str:
        return "args" if self.kind == KIND_FROM_ARGS else CommKind(self.kind).label


def parse_rules(text: str, source: str, *, check: bool = True) -> list[Rule]:
    """The rules of a rules file's text; a bad line raises :class:`RulesError` naming ``source`` and the line
    (``check`` False: the patterns are not compiled here, for the built-in file, which the tests check)."""
    out = []
    for no, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(None, 4)
        where = f"line {no}: "
        if len(parts) < 5:
            raise RulesError(
                where + f"expected 5 fields (on family type kind pattern), found {len(parts)}",
                path=source,
                fix="e.g. 'kernel mylib communication all_reduce ^my_allreduce'",
            )
        on, family, type_, kind, pattern = parts
        if on not in _ON:
            raise RulesError(where + f"unknown target {on!r}", path=source, fix="use 'kernel' or 'op'")
        if type_ not in _TYPES:
            raise RulesError(where + f"unknown type {type_!r}", path=source, fix="use one of " + ", ".join(_TYPES))
        if on == "op" and _TYPES[type_] is not KernelType.COMMUNICATION:
            raise RulesError(where + "an op rule's type must be communication", path=source)
        if kind == "args" and on == "op":
            kind_code = KIND_FROM_ARGS
        elif kind in _KINDS:
            kind_code = int(_KINDS[kind])
        else:
            raise RulesError(
                where + f"unknown collective kind {kind!r}",
                path=source,
                fix="use one of " + ", ".join(_KINDS) + (", args" if on == "op" else ""),
            )
        try:
            if check:
                re.compile(pattern)
        except re.error as e:
            raise RulesError(where + f"bad regular expression {pattern!r}: {e}", path=source) from None
        out.append(Rule(on, family, _TYPES[type_], kind_code, pattern, source, no))
    return out


@dataclass(frozen=True)
class RuleTable:
    """Rules in the order they are tried (see the module docstring). ``rules[i]`` is rule id ``i``."""

    rules: tuple
    files: tuple = ()  # the users' rules files read into this table, first to last
    _kernel: dict = field(default_factory=dict, repr=False, compare=False)  # name -> (type, kind, rule id)
    _op: dict = field(default_factory=dict, repr=False, compare=False)  # name -> (kind, rule id)
    _compiled: dict = field(default_factory=dict, repr=False, compare=False)  # "kernel"/"op" -> [(rule id, pattern)]

    def __post_init__(self):
        k = [i for i, r in enumerate(self.rules) if r.on == "kernel"]
        o = [i for i, r in enumerate(self.rules) if r.on == "op"]
        object.__setattr__(self, "_kernel_ids", k)
        object.__setattr__(self, "_op_ids", o)
        object.__setattr__(self, "_op_any", _any_of(self.rules[i] for i in o))

    def fingerprint(self) -> str:
        """A digest of the rules, in order (each one's target, family, type, kind and expression): two tables with
        the same digest classify every name alike. Computed once per table."""
        fp = self.__dict__.get("_fingerprint")
        if fp is None:
            import hashlib

            text = json.dumps([[r.on, r.family, int(r.type), int(r.kind), r.regex] for r in self.rules])
            fp = hashlib.sha1(text.encode("utf-8")).hexdigest()[:24]
            object.__setattr__(self, "_fingerprint", fp)
        return fp

    def extended(self, user: Sequence[Rule], files: Sequence[str] = ()) -> RuleTable:
        """This table with ``user`` rules tried first."""
        return RuleTable(tuple(user) + self.rules, tuple(files) + self.files)

    def kernel_rule(self, name: str) -> tuple[int, int, int]:
        """``(type, kind, rule id)`` of one GPU activity name (kind −1 unless communication); no rule:
        ``(COMPUTATION, -1, -1)``."""
        hit = self._kernel.get(name)
        if hit is None:
            hit = (int(KernelType.COMPUTATION), -1, -1)
            # each rule on its own, in order: kernel names are long and most match no rule, and one expression of
            # every rule searches them at each position for every rule (job8's 270 names: 50 ms, here 21 ms)
            for i, pattern in self._patterns("kernel"):
                if pattern.search(name):
                    r = self.rules[i]
                    hit = (int(r.type), r.kind if r.type is KernelType.COMMUNICATION else -1, i)
                    break
            self._kernel[name] = hit
        return hit

    def _patterns(self, on: str) -> list:
        """(rule id, compiled pattern) of the ``on`` rules (``"kernel"`` or ``"op"``) in order, compiled once."""
        pats = self._compiled.get(on)
        if pats is None:
            ids = self._kernel_ids if on == "kernel" else self._op_ids
            pats = self._compiled[on] = [(i, self.rules[i].pattern) for i in ids]
        return pats

    def op_rule(self, name: str) -> tuple[int, int]:
        """``(kind, rule id)`` of the first op rule matching a CPU op or annotation name; ``(-1, -1)`` if none."""
        hit = self._op.get(name)
        if hit is None:
            hit = (-1, -1)
            if self._op_any is not None and self._op_any.search(name):
                for i, pattern in self._patterns("op"):
                    if pattern.search(name):
                        hit = (self.rules[i].kind, i)
                        break
            self._op[name] = hit
        return hit

    def classify_kernels(self, names: Iterable[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(type int8, kind int8, rule id int32)`` of each name (call it with distinct names)."""
        hits = [self.kernel_rule(n) for n in names]
        a = np.array(hits, dtype=np.int64).reshape(-1, 3)
        return a[:, 0].astype(np.int8), a[:, 1].astype(np.int8), a[:, 2].astype(np.int32)

    def classify_ops(self, names: Iterable[str]) -> tuple[np.ndarray, np.ndarray]:
        """``(kind int8, rule id int32)`` of each op name (distinct names); rule −1 where no op rule matches."""
        a = np.array([self.op_rule(n) for n in names], dtype=np.int64).reshape(-1, 2)
        return a[:, 0].astype(np.int8), a[:, 1].astype(np.int32)


def anchored_once(regex: str) -> str:
    """``regex``, when each of its alternatives is one group that starts with ``^`` (HTA's form, ``(^a)|(^.*b)``),
    as one anchor before them all: ``^(?:(a)|(.*b))``. A search of either matches the same strings (every
    alternative can match only at the start), and the groups keep their numbers; but ``re`` tries the first at every
    position of the string, the second at its start alone (a long kernel name against HTA's "other" rule: 35 us ->
    0.5 us). Any other ``regex`` is returned as it is."""
    branches = _top_level(regex)
    if len(branches) < 2:
        return regex
    inner = []
    for b in branches:
        if not (b.startswith("(^") and _closes_at_end(b)) or len(_top_level(b[1:-1])) != 1:
            return regex
        inner.append("(" + b[2:])
    return "^(?:" + "|".join(inner) + ")"


def _top_level(regex: str) -> list:
    """The alternatives of ``regex`` at its top level (split at ``|`` outside groups, classes and escapes)."""
    out, depth, start = [], 0, 0
    for i, c in _structure(regex):
        depth += 1 if c == "(" else -1 if c == ")" else 0
        if c == "|" and depth == 0:
            out.append(regex[start:i])
            start = i + 1
    out.append(regex[start:])
    return out


def _closes_at_end(branch: str) -> bool:
    """Whether the group ``branch`` opens with closes at its last character (the branch is that one group)."""
    depth = 0
    for i, c in _structure(branch):
        depth += 1 if c == "(" else -1 if c == ")" else 0
        if depth == 0:
            return c == ")" and i == len(branch) - 1
    return False


def _structure(regex: str) -> Iterator[tuple[int, str]]:
    """(position, character) of each ``(``, ``)`` and ``|`` of ``regex`` that is not escaped or in a class."""
    i, n = 0, len(regex)
    while i < n:
        c = regex[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":  # a class, up to its closing ``]`` (one right after ``[`` or ``[^`` is a member)
            i += 1
            if i < n and regex[i] == "^":
                i += 1
            if i < n and regex[i] == "]":
                i += 1
            while i < n and regex[i] != "]":
                i += 2 if regex[i] == "\\" else 1
            i += 1
            continue
        if c in "()|":
            yield i, c
        i += 1


def _any_of(rules: Iterable[Rule]) -> Optional[re.Pattern]:
    """One expression matching where any rule matches: the first test of an op name (short names, most matching
    none: 684 names of job8 in 0.13 ms, against 3 ms for each rule on its own)."""
    parts = [f"(?:{anchored_once(r.regex)})" for r in rules]
    return re.compile("|".join(parts)) if parts else None


_DEFAULT: list = []
_USER: dict = {}


def default_table() -> RuleTable:
    """The built-in table (``default.rules``, shipped in the package), read once."""
    if not _DEFAULT:
        _DEFAULT.append(
            RuleTable(
                tuple(parse_rules(DEFAULT_RULES_FILE.read_text(encoding="utf-8"), str(DEFAULT_RULES_FILE), check=False))
            )
        )
    return _DEFAULT[0]


def hta_table() -> RuleTable:
    """HTA 0.6.1's rules only (the built-in rules of family ``hta``): the name-only classification of the HTA
    rule sets, which users' rules never change."""
    if len(_DEFAULT) < 2:
        _DEFAULT.append(RuleTable(tuple(r for r in default_table().rules if r.family == HTA_FAMILY)))
    return _DEFAULT[1]


def user_table(files: Sequence[Union[str, Path]]) -> RuleTable:
    """The built-in table with the rules of ``files`` first (the first file's rules first)."""
    names = tuple(str(f) for f in files)
    key = tuple((f, _stamp(f)) for f in names)  # a file edited since it was read is read again
    out = _USER.get(key)
    if out is None:
        rules: list = []
        for f in names:
            try:
                text = Path(f).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as e:
                raise RulesError(
                    f"cannot read the rules file: {getattr(e, 'strerror', None) or e}",
                    path=f,
                    fix="give a readable text file of rules (see docs/rules.md)",
                ) from None
            rules += parse_rules(text, f)
        out = _USER[key] = default_table().extended(rules, names)
    return out


def _stamp(path: str):
    try:
        st = os.stat(path)
        return st.st_mtime_ns, st.st_size
    except OSError:
        return None


def resolve_table(rules: Union[None, str, Path, Sequence, RuleTable] = None) -> RuleTable:
    """The table for a ``rules=`` argument: a :class:`RuleTable` as given; a rules file or a list of them; None:
    the files named by ``$HOLOTRACE_RULES`` (separated like PATH), else the built-in table."""
    if isinstance(rules, RuleTable):
        return rules
    if rules is None:
        env = os.environ.get(ENV_RULES, "")
        files = [f for f in env.split(os.pathsep) if f.strip()]
    elif isinstance(rules, (str, Path)):
        files = [rules]
    else:
        files = list(rules)
    return user_table(files) if files else default_table()
