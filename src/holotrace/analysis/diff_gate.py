"""CI gate rules on a diff: ``step_time>+5%``, ``idle>+2pp``, ``kernel:nccl*>+10%``, ``overlap<-5pp``.

:func:`check_rules` evaluates rules against a :class:`~holotrace.analysis.diff.JobDiff` with a noise guard (the
change must exceed ``min_effect`` × the step-to-step spread of the base side); :func:`parse_rule` reads one rule.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from holotrace.analysis.diff import FAMILIES, METRICS, JobDiff
from holotrace.errors import AnalysisError

__all__ = ["Trip", "parse_rule", "check_rules"]


class Trip(NamedTuple):
    """One gate rule that tripped: on what item, by how much."""

    rule: str
    item: str
    base: float
    new: float
    change: float
    unit: str
    sigma: float

    def message(self) -> str:
        u = {"%": "%", "pp": " pp", "us": " us"}[self.unit]
        return (
            f"{self.item}: {self.base:.6g} -> {self.new:.6g} ({self.change:+.3g}{u}; base step-to-step "
            f"sigma {self.sigma:.3g}) trips {self.rule}"
        )


_RULE = re.compile(
    r"^\s*(?P<metric>[^<>]+?)\s*(?P<op>[<>])\s*(?P<value>[+-]?\d+(?:\.\d+)?)\s*(?P<unit>%|pp|us|ms)?\s*$"
)


def parse_rule(text: str) -> tuple:
    """``"kernel:nccl*>+10%"`` → ``(metric, op, value, unit)``; a bad rule raises a one-line AnalysisError."""
    m = _RULE.match(text)
    if not m:
        raise AnalysisError(
            f"cannot read the rule {text!r}", fix="write METRIC>+N% (or pp, us, ms), e.g. step_time>+5%"
        )
    metric, op, value, unit = m.group("metric"), m.group("op"), float(m.group("value")), m.group("unit")
    family = metric.split(":", 1)[0] if ":" in metric else None
    if family is None and metric not in METRICS:
        raise AnalysisError(
            f"unknown metric {metric!r} in rule {text!r}",
            fix=f"use {', '.join(METRICS)}, or kernel:GLOB, op:GLOB, annotation:GLOB",
        )
    if family is not None and family not in FAMILIES:
        raise AnalysisError(f"unknown name family {family!r} in rule {text!r}", fix="use kernel:, op: or annotation:")
    if unit is None:
        unit = "pp" if METRICS.get(metric) == "pct" else "%"
    if unit == "pp" and METRICS.get(metric) != "pct":
        raise AnalysisError(f"rule {text!r}: pp applies to percentages only", fix="use % or us for this metric")
    if unit == "ms":
        unit, value = "us", value * 1000.0
    return metric, op, value, unit


def _change(base: float, new: float, unit: str) -> float:
    if unit == "%":
        return 100.0 * (new - base) / abs(base) if base else (np.inf if new > 0 else 0.0)
    return new - base


def check_rules(d: JobDiff, rules: Sequence[str], *, min_effect: float = 2.0) -> list:
    """The :class:`Trip` of every rule that trips (named items largest first): a change beyond the rule's
    value whose size also exceeds ``min_effect`` × the base's step-to-step standard deviation."""
    trips = []
    m = d.metrics.set_index("metric")
    for text in rules:
        metric, op, value, unit = parse_rule(text)
        if ":" in metric:
            family, pattern = metric.split(":", 1)
            ops = d.ops[(d.ops["rank"] == -1) & (d.ops["family"] == family)]
            hit = ops[[fnmatch.fnmatchcase(str(k), pattern) for k in ops["key"]]]
            cands = [
                (f"{family}:{k}", b, n, s)
                for k, b, n, s in zip(
                    hit["key"], hit["per_step_us_base"], hit["per_step_us_new"], hit["per_step_sigma_base"]
                )
            ]
        else:
            row = m.loc[metric]
            cands = [(metric, row["base"], row["new"], row["base_sigma"])]
        for item, b, n, sigma in cands:
            if not (np.isfinite(b) and np.isfinite(n)):
                continue
            ch = _change(b, n, unit)
            beyond = ch > value if op == ">" else ch < value
            if beyond and abs(n - b) > min_effect * (sigma if np.isfinite(sigma) else 0.0):
                trips.append(Trip(text, item, float(b), float(n), float(ch), unit, float(sigma)))
    order = {t: i for i, t in enumerate(d.contributors["item"].tolist())}
    rank_of = lambda t: order.get(t.item if ":" in t.item else "", order.get(f"idle:{t.item}", len(order)))  # noqa: E731
    return sorted(trips, key=lambda t: (rank_of(t), -abs(t.new - t.base)))
