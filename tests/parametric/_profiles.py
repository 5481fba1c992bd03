"""Example counts of the parametric tests under the profile chosen by ``HOLOTRACE_HYPOTHESIS_PROFILE``."""

from __future__ import annotations

import os

ENV = "HOLOTRACE_HYPOTHESIS_PROFILE"
#: multiplier applied to every test's base example count
SCALE = {"quick": 1, "thorough": 20}
#: the profile's default ``max_examples`` (tests that do not set their own)
PROFILES = {name: 100 * k for name, k in SCALE.items()}


def examples(base: int) -> int:
    """``base`` examples under ``quick``, ``SCALE`` times as many under the chosen profile."""
    return base * SCALE.get(os.environ.get(ENV, "quick"), 1)
