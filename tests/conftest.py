"""Shared test configuration: hypothesis profiles (``ci`` is derandomized, so every run checks the same cases)."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile("ci", derandomize=True, max_examples=200, deadline=None, print_blob=True)
settings.register_profile("dev", max_examples=200, deadline=None)
settings.register_profile("nightly", max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))
