"""Hypothesis profiles for the parametric tests, chosen by ``HOLOTRACE_HYPOTHESIS_PROFILE``.

* ``quick`` (default): few examples per test, the whole folder in well under a minute (CI);
* ``thorough``: many more examples, for a run on demand before a release or after touching
  interval arithmetic or the decoder.

Tests size their example counts with :func:`_profiles.examples`, so one variable scales the
cheap tests and the expensive ones alike.
"""

from __future__ import annotations

import os

import pytest
from _profiles import ENV, PROFILES, SCALE
from hypothesis import HealthCheck, settings

for _name, _scale in SCALE.items():
    settings.register_profile(
        _name,
        max_examples=PROFILES[_name],
        deadline=None,  # timings on shared CI machines vary too much for per-example deadlines
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        print_blob=True,  # a failure prints the line that replays it
    )

_chosen = os.environ.get(ENV, "quick")
if _chosen not in SCALE:
    raise pytest.UsageError(f"{ENV}={_chosen!r} is not a known profile; use one of {', '.join(SCALE)}")
settings.load_profile(_chosen)


def pytest_report_header(config):
    return f"hypothesis profile: {_chosen} (set {ENV}=thorough for the long run)"
