"""Project-wide settings for the suites and the plugin's own tests.

Hypothesis runs derandomized with a bounded number of examples and no example database, so a
shape-fuzzing test explores the same shapes on every run: a CI gate must not flip on luck.
Select another profile with HYPOTHESIS_PROFILE=thorough for exploratory runs.
"""

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "rocm_validate",
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=12,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.register_profile("thorough", parent=settings.get_profile("rocm_validate"), max_examples=200)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "rocm_validate"))
